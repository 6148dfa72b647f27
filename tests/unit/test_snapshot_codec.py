"""Snapshots are data: every journey's state survives header + pages + msgpack
exactly; the header stays small however long the run; a restored state reads
its past turns only when a decision asks for them; a newer format is refused."""

from __future__ import annotations

from typing import Any

import pytest
from journeys import JOURNEYS
from runlog import Log, do_claim, do_finish, do_model_turn, do_validate, use

from events import snapshot
from events.snapshot import PAGE_TURNS, SnapshotError, header, pages, restore, tail_turns
from events.state import RunState
from events.tool_step import Succeeded
from schemas.codec import pack, unpack


def round_trip(s: RunState) -> tuple[RunState, list[int]]:
    """The state restored from its snapshot through msgpack, and how often its pages
    were read."""
    head = unpack(pack(header(s)))
    tail = unpack(pack(tail_turns(s)))
    stored = {n: pack(p) for n, p in pages(s, first=0).items()}
    reads: list[int] = []

    def read_pages(n: int) -> list[list[dict[str, Any]]]:
        reads.append(n)
        return [unpack(stored[i]) for i in range(n)]

    return restore(head, spec=s.spec, read_tail=lambda: tail, read_pages=read_pages), reads


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


def test_a_long_runs_header_stays_small_and_its_past_is_read_only_on_demand() -> None:
    short, long = long_run(3).s, long_run(3 * PAGE_TURNS + 5).s
    assert len(pack(header(long))) < 2 * len(pack(header(short))) + 2000
    restored, reads = round_trip(long)
    assert len(restored.history) == len(long.history) and reads == []
    assert restored.current_turn == long.current_turn and reads == []
    assert list(restored.history) == list(long.history) and reads == [3]
    list(restored.history)
    assert reads == [3], "read once"


def test_only_the_pages_that_filled_up_since_are_written_again() -> None:
    s = long_run(2 * PAGE_TURNS + 1).s
    assert sorted(pages(s, first=0)) == [0, 1]
    assert pages(s, first=2) == {}


def test_a_snapshot_of_a_newer_format_is_refused_not_misread() -> None:
    s = long_run(1).s
    head = header(s) | {"v": snapshot.VERSION + 1}
    with pytest.raises(SnapshotError, match="newer"):
        restore(head, spec=s.spec, read_tail=lambda: tail_turns(s), read_pages=lambda n: [])


def test_the_tail_turns_are_decoded_only_when_past_turns_are_asked_for() -> None:
    s = long_run(PAGE_TURNS + 3).s
    asked: list[str] = []

    def read_tail() -> list[dict[str, Any]]:
        asked.append("tail")
        return unpack(pack(tail_turns(s)))

    def read_pages(n: int) -> list[list[dict[str, Any]]]:
        asked.append(f"pages {n}")
        return [unpack(pack(p)) for p in pages(s, first=0).values()]

    restored = restore(unpack(pack(header(s))), spec=s.spec, read_tail=read_tail, read_pages=read_pages)
    assert len(restored.history) == len(s.history) and restored.current_turn == s.current_turn
    assert asked == []
    assert restored.history.item(len(s.history) - 1) == s.history.item(len(s.history) - 1)
    assert asked == ["tail", "pages 1"]
    assert restored == s and asked == ["tail", "pages 1"], "read once"


def test_tail_turns_that_do_not_match_the_header_are_refused_when_read() -> None:
    s = long_run(3).s
    restored = restore(header(s), spec=s.spec, read_tail=lambda: [], read_pages=lambda n: [])
    with pytest.raises(SnapshotError, match="0 turns after 0 pages"):
        list(restored.history)


def test_a_claims_worker_survives_and_a_record_written_before_it_was_kept_reads_as_none() -> None:
    log = Log.created()
    do_model_turn(log, use("c1"))
    do_validate(log, "c1")
    do_claim(log, "c1")
    restored, _ = round_trip(log.s)
    assert restored.call("c1").claimed_by == "worker-1"  # type: ignore[union-attr]
    head = header(log.s)
    del head["current_turn"]["calls"][0]["claimed_by"]  # as version 2 wrote it at first
    older = restore(head, spec=log.s.spec, read_tail=lambda: tail_turns(log.s), read_pages=lambda n: [])
    assert older.call("c1").claimed_by is None  # type: ignore[union-attr]
    assert older.call("c1").claim_deadline == log.s.call("c1").claim_deadline  # type: ignore[union-attr]
