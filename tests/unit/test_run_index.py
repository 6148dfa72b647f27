"""Pages of the runs index (`services/entrypoints/run_index.py`) with a filter the
caller tests: every match once, newest first, across pages; and a search bounded
by how many runs it may look at a page goes on where it stopped."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from runlog import Log

from agentledger.events.state import RunState
from agentledger.services.adapters.reading.port import Position
from agentledger.services.entrypoints.run_index import page_of_runs

RUNS = 200
BASE = Log.created().s
STATES = {f"r-{n:03d}": dataclasses.replace(BASE, run_id=f"r-{n:03d}") for n in range(RUNS)}
MATCHES = ["r-157", "r-107", "r-057", "r-007"]


class Index:
    """A runs index of RUNS runs created one a millisecond, r-000 first."""

    def __init__(self) -> None:
        self.positions = sorted(((float(n), f"r-{n:03d}") for n in range(RUNS)), reverse=True)
        self.looked = 0

    def runs_before(self, cursor: Position, floor_ms: float, n: int) -> tuple[list[Position], bool]:
        older = [p for p in self.positions if p < cursor and p[0] >= floor_ms]
        self.looked += len(older[:n])
        return older[:n], len(older) <= n


def load(ids: Sequence[str]) -> list[RunState | None]:
    return [STATES[i] for i in ids]


def matches(state: RunState) -> bool:
    return state.run_id in MATCHES


def every_page(index: Index, **args: Any) -> list[list[str]]:
    found, token = [], None
    while True:
        page = page_of_runs(index, load, statuses=frozenset(), since=None, until=None,
                            token=token, keep=matches, **args)  # fmt: skip
        found.append([s.run_id for s in page.states])
        if (token := page.next_token) is None:
            return found


def test_a_filter_finds_every_match_once_newest_first_a_page_at_a_time() -> None:
    assert every_page(Index(), limit=3) == [MATCHES[:3], MATCHES[3:]]


def test_a_bounded_search_stops_after_so_many_runs_and_its_token_goes_on_from_there() -> None:
    index = Index()
    found = every_page(index, limit=10, most_scanned=60)
    assert [r for page in found for r in page] == MATCHES  # each once, newest first
    # batches of 50: a page stops once 60 are passed, at 100 runs looked at
    assert found == [MATCHES[:2], MATCHES[2:]]
    assert index.looked == RUNS  # every run looked at once in all


def test_an_unbounded_search_reads_the_whole_index_for_one_page() -> None:
    index = Index()
    assert every_page(index, limit=10) == [MATCHES]
    assert index.looked == RUNS
