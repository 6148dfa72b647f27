"""The delegate tool's handlers on the in-memory adapters: a parent's two delegate
calls start two children and record each child's end once, with its spend, however
often the calls and the parent are driven again (a redelivered claim, a re-sent
DriveFlow): the child's id is the parent's and the call's, so a call finds its child."""

from __future__ import annotations

from pathlib import Path

import pytest
import unit_tools
from handlerkit import Unit, new_unit

from agentledger.events.commands import DriveCall, DriveFlow
from agentledger.events.delegate import delegate_child_id
from agentledger.events.status import RunStatus
from agentledger.events.types import ChildRunEnded, ModelResponded, RunCreated, ToolCallSucceeded
from agentledger.schemas.spec import RunSpec

PARENT = "r-dlg.s0"
CHILD_MODEL = {"scripted": [{"end_turn": "child done"}]}


def parent_spec() -> RunSpec:
    calls = [{"id": c, "name": "delegate", "input": {"task": f"part {c}"}} for c in ("a", "b")]
    return RunSpec.model_validate(
        {
            "task": "split", "tools": ["unit_tools"],
            "tool_path": [str(Path(unit_tools.__file__).parent)],
            "principal": {"id": "unit", "tenant": "unit-tenant"}, "budgets": {"max_turns": 10},
            "delegate": {"model": CHILD_MODEL},
            "model": {"scripted": [{"tool_use": calls}, {"end_turn": "all done"}]},
        }
    )  # fmt: skip


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


def test_driven_again_at_every_step_two_calls_start_two_children_once(unit: Unit) -> None:
    unit.create(PARENT, parent_spec())
    for _ in range(60):
        commands = unit.take()
        if not commands:
            break
        for command in commands:
            unit.deliver(command)
            for call_id in ("a", "b"):  # a redelivered claim, a re-sent child's end
                unit.deliver(DriveCall(PARENT, call_id))
                unit.deliver(DriveFlow(PARENT))

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.COMPLETED, parent.detail
    log = [e.data for e in unit.memory.read(PARENT)]
    ended = [e for e in log if isinstance(e, ChildRunEnded)]
    assert sorted(e.child_run_id for e in ended) == sorted(
        delegate_child_id(PARENT, c) for c in ("a", "b")
    )
    assert len([e for e in log if isinstance(e, ToolCallSucceeded)]) == 2
    for e in ended:
        child_log = [x.data for x in unit.memory.read(e.child_run_id)]
        assert sum(isinstance(x, RunCreated) for x in child_log) == 1
        assert unit.state(e.child_run_id).usage == e.usage  # its spend, to the token
    replies = [e for e in log if isinstance(e, ModelResponded)]
    for side in ("input_tokens", "output_tokens"):
        mine = sum(getattr(r.usage, side) for r in replies)
        kids = sum(getattr(e.usage, side) for e in ended)
        assert getattr(parent.usage, side) == mine + kids  # own turns plus children's
