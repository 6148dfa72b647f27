"""Snapshots are data: every journey's state survives header + pages + msgpack
exactly; the header stays small however long the run; a restored state holds
its whole past (read before anything decides on it); a newer format is refused."""

from __future__ import annotations

import pytest
from journeys import JOURNEYS
from runlog import Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events import snapshot
from agentledger.events.snapshot import (
    PAGE_TURNS,
    SnapshotError,
    full_pages,
    header,
    pages,
    restore,
    tail_turns,
)
from agentledger.events.state import RunState
from agentledger.events.tool_step import Succeeded
from agentledger.schemas.codec import pack, unpack


def round_trip(s: RunState) -> tuple[RunState, int]:
    """The state restored from its snapshot through msgpack, and how many pages the
    header said to read."""
    head = unpack(pack(header(s)))
    tail = unpack(pack(tail_turns(s)))
    stored = {n: pack(p) for n, p in pages(s, first=0).items()}
    full = full_pages(head)
    read = [unpack(stored[i]) for i in range(full)]
    return restore(head, spec=s.spec, pages=read, tail=tail), full


@pytest.mark.parametrize("journey", sorted(JOURNEYS))
def test_every_journeys_state_survives_its_snapshot(journey: str) -> None:
    state = JOURNEYS[journey][0]().s
    restored, _ = round_trip(state)
    assert restored == state


def long_run(turns: int) -> Log:
    log = Log.created(max_turns=turns + 2)
    for i in range(turns):
        do_model_turn(log, use(f"c{i}", path=f"f{i}"))
        do_validate(log, f"c{i}")
        do_claim(log, f"c{i}")
        do_finish(log, f"c{i}", Succeeded(output={"i": i, "text": "x" * 50}))
    return log


def test_a_long_runs_header_stays_small_and_names_the_pages_to_read_with_it() -> None:
    short, long = long_run(3).s, long_run(3 * PAGE_TURNS + 5).s
    assert len(pack(header(long))) < 2 * len(pack(header(short))) + 2000
    restored, full = round_trip(long)
    assert full == 3 and full_pages(header(short)) == 0
    assert list(restored.history) == list(long.history)
    assert restored.current_turn == long.current_turn


def test_only_the_pages_that_filled_up_since_are_written_again() -> None:
    s = long_run(2 * PAGE_TURNS + 1).s
    assert sorted(pages(s, first=0)) == [0, 1]
    assert pages(s, first=2) == {}


def test_a_snapshot_of_a_newer_format_is_refused_not_misread() -> None:
    s = long_run(1).s
    head = header(s) | {"v": snapshot.VERSION + 1}
    with pytest.raises(SnapshotError, match="newer"):
        restore(head, spec=s.spec, pages=[], tail=tail_turns(s))


def test_a_restored_state_holds_its_past_and_a_missing_page_is_refused() -> None:
    s = long_run(PAGE_TURNS + 3).s
    tail = unpack(pack(tail_turns(s)))
    read = [unpack(pack(p)) for p in pages(s, first=0).values()]
    restored = restore(unpack(pack(header(s))), spec=s.spec, pages=read, tail=tail)
    assert restored.history.item(len(s.history) - 1) == s.history.item(len(s.history) - 1)
    assert restored == s
    with pytest.raises(SnapshotError, match="0 pages of 1"):
        restore(header(s), spec=s.spec, pages=[], tail=tail)


def test_tail_turns_that_do_not_match_the_header_are_refused() -> None:
    s = long_run(3).s
    with pytest.raises(SnapshotError, match="0 turns after 0 pages"):
        restore(header(s), spec=s.spec, pages=[], tail=[])


def test_a_claims_worker_survives_and_a_record_written_before_it_was_kept_reads_as_none() -> None:
    log = Log.created()
    do_model_turn(log, use("c1"))
    do_validate(log, "c1")
    do_claim(log, "c1")
    restored, _ = round_trip(log.s)
    assert restored.call("c1").claimed_by == "worker-1"  # type: ignore[union-attr]
    head = header(log.s)
    del head["current_turn"]["calls"][0]["claimed_by"]  # as version 2 wrote it at first
    older = restore(head, spec=log.s.spec, pages=[], tail=tail_turns(log.s))
    assert older.call("c1").claimed_by is None  # type: ignore[union-attr]
    assert older.call("c1").claim_deadline == log.s.call("c1").claim_deadline  # type: ignore[union-attr]
