"""`agentledger.events.frozen.replace`, the fold's faster `dataclasses.replace`: the same
objects as the standard one, the same refusals."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from agentledger.events.frozen import fill, replace
from agentledger.events.state import Call, RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.schemas.spec import Principal, RunSpec, ScriptedModel, ScriptedTurn

SPEC = RunSpec(
    task="t",
    principal=Principal(id="p", tenant="t"),
    model=ScriptedModel(scripted=(ScriptedTurn(end_turn="done"),)),
)
CALL = Call(call_id="c1", turn=1, name="noop", input={"n": 1}, status=CallStatus.PROPOSED)
TURN = Turn(index=1, content=(), stop_reason="tool_use", model="m", calls=(CALL,))
STATE = RunState(
    run_id="r", status=RunStatus.VALIDATING, spec=SPEC, workspace=None, created_at=1.0,
    current_turn=TURN,
)  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "changes"),
    [
        (STATE, {"seq": 7, "updated_at": 2.0}),
        (STATE, {}),
        (TURN, {"feedback": "again"}),
        (CALL, {"status": CallStatus.VALIDATED, "reads": ("kv:a",)}),
    ],
)
def test_replacing_gives_what_dataclasses_replace_gives(obj: object, changes: dict) -> None:
    mine, theirs = replace(obj, **changes), dataclasses.replace(obj, **changes)  # type: ignore[type-var]

    assert mine == theirs and type(mine) is type(theirs) and mine is not obj
    assert all(getattr(mine, f.name) is getattr(theirs, f.name) for f in dataclasses.fields(mine))


def test_the_copy_is_frozen_too() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace(STATE, seq=3).seq = 4  # type: ignore[misc]


def test_an_unknown_field_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        replace(STATE, no_such_field=1)


@dataclass(frozen=True)
class _Checked:
    n: int
    double: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "double", 2 * self.n)


def test_a_class_with_post_init_is_left_to_dataclasses() -> None:
    assert replace(_Checked(1), n=5).double == 10


@dataclass(frozen=True)
class _Plain:  # no slots: its fields are set by name, not through slot setters
    n: int
    tags: tuple[str, ...] = ()


def test_a_class_without_slots_is_copied_by_name() -> None:
    old = _Plain(1, ("a",))
    assert replace(old, n=2) == dataclasses.replace(old, n=2) == _Plain(2, ("a",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        replace(old, n=2).n = 3  # type: ignore[misc]


def test_fill_sets_fields_of_a_state_just_made_in_place_and_refuses_unknown_names() -> None:
    made = replace(STATE, seq=1)
    filled = fill(made, seq=2, last_event_id="e2")
    assert filled is made and (made.seq, made.last_event_id) == (2, "e2")
    assert STATE.seq == 0, "the state it was made from is untouched"
    with pytest.raises(AttributeError):
        fill(made, no_such_field=1)
