"""A snapshot's past turns are packed once each (`snapshots.PackedTurns`): the
arrays it makes are the bytes msgpack makes of the same records, and a turn it
holds is not packed again."""

from __future__ import annotations

import pytest

from agentledger.events import snapshot
from agentledger.events.fold import fold
from agentledger.events.sample_run import sample_log
from agentledger.events.state import Turn
from agentledger.schemas.codec import pack
from agentledger.services.handlers.snapshots import PackedTurns


@pytest.mark.parametrize("count", [0, 1, 15, 16, 40, 70_000])
def test_an_array_of_packed_turns_is_what_msgpack_makes_of_their_records(count: int) -> None:
    state = fold(sample_log())
    assert state is not None
    turns = [state.history.item(i % 2) for i in range(count)]

    assert PackedTurns().array(turns) == pack([snapshot.turn_record(t) for t in turns])


def _two_turns_counted(monkeypatch: pytest.MonkeyPatch) -> tuple[Turn, Turn, list[int]]:
    """The sample run's two past turns, and the turn indexes packed from now on."""
    state = fold(sample_log())
    assert state is not None
    packed: list[int] = []
    record = snapshot.turn_record
    monkeypatch.setattr(snapshot, "turn_record", lambda t: packed.append(t.index) or record(t))
    return state.history.item(0), state.history.item(1), packed


def test_a_turn_is_packed_once_while_it_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, packed = _two_turns_counted(monkeypatch)
    turns = PackedTurns(capacity=1)

    turns.array([first]), turns.array([first]), turns.array([second]), turns.array([first])

    assert packed == [first.index, second.index, first.index], "the second turn pushed it out"


def test_packed_turns_are_kept_up_to_a_number_of_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, packed = _two_turns_counted(monkeypatch)
    both = len(pack(snapshot.turn_record(first))) + len(pack(snapshot.turn_record(second)))
    packed.clear()
    turns = PackedTurns(max_bytes=both - 1)

    turns.array([first, second]), turns.array([second]), turns.array([first])

    assert packed == [first.index, second.index, first.index], "both did not fit"
