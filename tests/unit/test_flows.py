"""Flows through the handlers and the in-memory adapters: each stage a child run with
its own log, linked both ways; the parent's spend the sum of its children's, to the
token; routes by outcome (a gate approved or denied, a failed call back to an earlier
stage at most `max_loops` times); a flow driven again at every step starts no stage
twice and runs no call twice; a cancelled flow cancels its live child; a child that
waits for a person puts its flow in wait, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unit_tools
from handlerkit import Unit, call, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import DriveFlow
from agentledger.events.flow_step import waiting_run
from agentledger.events.status import RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.types import ChildRunEnded, ChildRunStarted, RunCreated
from agentledger.schemas.content import Usage
from agentledger.schemas.spec import RunSpec
from agentledger.services.handlers.engine import Decided

PARENT = "r-flow.s0"
FIRST = {
    "id": "first",
    "agent": {
        "task": "write {input.task}",
        "budgets": {"max_turns": 4},
        "model": {"scripted": [
            {"tool_use": [call("w1", "kv_write", key="a", value="1")]},
            {"end_turn": '{"summary": "wrote a", "key": "a"}'},
        ]},
    },
}  # fmt: skip
CHECK = {"id": "check", "call": {"tool": "kv_read", "input": {"key": "{first.result.key}"}}}
GATE = {"id": "gate", "human": {"question": "ship {first.result.key}?"}}
LAST = {"id": "last", "call": {"tool": "kv_write", "input": {"key": "{first.result.key}",
                                                              "value": "final"}}}  # fmt: skip


def flow_spec(*stages: dict[str, Any], max_loops: int = 3, max_turns: int = 30) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "the flow's task",
            "tools": ["unit_tools"],
            "tool_path": [str(Path(unit_tools.__file__).parent)],
            "principal": {"id": "unit", "tenant": "unit-tenant"},
            "budgets": {"max_turns": max_turns},
            "flow": list(stages),
            "max_loops": max_loops,
        }
    )


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


def children(unit: Unit) -> list[str]:
    return [
        e.data.child_run_id for e in unit.memory.read(PARENT) if isinstance(e.data, ChildRunStarted)
    ]


def answer(unit: Unit, approve: bool) -> None:
    def decide(s: Any) -> Any:
        at = s.escalation
        if approve:
            return controls.resume(s, by="pat", escalation=at)
        return controls.abort(s, by="pat", escalation=at, note="not today")

    unit.app.engine.take(PARENT, Decided("test", decide))
    unit.drive()


def test_a_flow_runs_its_stages_as_child_runs_and_completes_after_its_gate(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(FIRST, CHECK, GATE, LAST))
    unit.drive()
    parent = unit.state(PARENT)
    assert parent.status is RunStatus.AWAITING_HUMAN
    assert parent.detail.startswith("ship a? — evidence: first completed")
    answer(unit, approve=True)

    assert unit.state(PARENT).status is RunStatus.COMPLETED
    kids = children(unit)
    assert kids == ["r-flow.first.1.s0", "r-flow.check.1.s0", "r-flow.last.1.s0"]
    for kid in kids:  # linked both ways
        created = unit.memory.read(kid)[0].data
        assert isinstance(created, RunCreated) and created.parent_run_id == PARENT
        assert created.spec.principal == unit.state(PARENT).spec.principal
    assert unit.state(kids[2]).turns[0].calls[0].input == {"key": "a", "value": "final"}
    assert unit_tools.RAN == {"w1": 1, "check-1": 1, "last-1": 1}


def test_the_parents_spend_is_the_sum_of_its_childrens_to_the_token(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(FIRST, CHECK, GATE, LAST))
    unit.drive()
    answer(unit, approve=True)

    kids = [unit.state(k) for k in children(unit)]
    total = sum((k.usage for k in kids), Usage())
    parent = unit.state(PARENT)
    assert parent.usage == total and total.input_tokens > 0
    assert parent.cost_usd == sum(k.cost_usd for k in kids)
    assert parent.flow is not None and parent.flow.turns == sum(k.turns_used for k in kids)


def test_a_denied_gate_ends_the_flow_failed_and_runs_nothing_after_it(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(FIRST, GATE, LAST))
    unit.drive()
    answer(unit, approve=False)

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.FAILED
    assert parent.detail == "stage 'gate' denied: not today"
    assert "last-1" not in unit_tools.RAN


def test_a_failing_stage_goes_back_at_most_max_loops_times(unit: Unit) -> None:
    refuse = {"id": "check", "call": {"tool": "kv_refuse", "input": {"key": "a"}},
              "on": {"failed": "first"}}  # fmt: skip
    unit.create(PARENT, flow_spec(FIRST, refuse, max_loops=2))
    unit.drive()

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.FAILED
    assert "max_loops (2)" in parent.detail
    assert [k.split(".")[1] for k in children(unit)] == ["first", "check"] * 3
    assert unit_tools.RAN["w1"] == 3


def test_a_flow_driven_again_at_every_step_starts_nothing_twice(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(FIRST, CHECK, GATE, LAST))
    for _ in range(40):  # every command delivered, then a re-drive of the flow thrice
        commands = unit.take()
        if not commands:
            break
        for command in commands:
            unit.deliver(command)
            for _ in range(3):
                unit.deliver(DriveFlow(PARENT))
    answer(unit, approve=True)
    for _ in range(3):
        unit.deliver(DriveFlow(PARENT))

    assert unit.state(PARENT).status is RunStatus.COMPLETED
    assert len(children(unit)) == 3
    assert unit_tools.RAN == {"w1": 1, "check-1": 1, "last-1": 1}


def test_a_childs_budgets_are_held_to_what_the_flow_has_left(unit: Unit) -> None:
    greedy = {**FIRST, "agent": {**FIRST["agent"], "budgets": {"max_turns": 50}}}
    unit.create(PARENT, flow_spec(greedy, CHECK, max_turns=3))
    unit.drive()

    started = [e.data for e in unit.memory.read(PARENT) if isinstance(e.data, ChildRunStarted)]
    assert started[0].spec.budgets.max_turns == 3  # not 50: the flow has 3
    assert started[1].spec.budgets.max_turns == 1  # the first used 2
    ended = [e.data for e in unit.memory.read(PARENT) if isinstance(e.data, ChildRunEnded)]
    assert ended[-1].status == "budget_exhausted"
    assert unit.state(PARENT).status is RunStatus.FAILED


def test_a_cancelled_flow_cancels_its_live_child_and_ends_after_it(unit: Unit) -> None:
    unit.create(PARENT, flow_spec(FIRST, CHECK))
    unit.drive(until=lambda u: len(children(u)) == 1)  # its first model request is queued
    unit.app.engine.take(
        PARENT, Decided("test", lambda s: controls.cancel(s, by="pat", source="test"))
    )
    assert unit.state(PARENT).status is RunStatus.CANCELLING  # its child still runs
    unit.drive()

    [kid] = children(unit)
    assert unit.state(kid).status is RunStatus.CANCELLED
    assert unit.state(kid).cancel_by == f"flow {PARENT}"
    types = unit.types(PARENT)
    assert types[-3:] == ["RunCancelRequested", "ChildRunEnded", "RunCancelled"]
    assert "w1" not in unit_tools.RAN


def test_a_child_waiting_for_a_person_puts_its_flow_in_wait_until_it_goes_on(unit: Unit) -> None:
    shy = {"id": "shy", "agent": {"task": "t", "model": {"scripted": [
        {"refusal": "I would rather ask"}, {"end_turn": '{"summary": "ok", "key": "a"}'}]}}}  # fmt: skip
    read = {"id": "read", "call": {"tool": "kv_read", "input": {"key": "{shy.result.key}"}}}
    unit.create(PARENT, flow_spec(shy, read))
    unit.drive()
    parent = unit.state(PARENT)
    [kid] = children(unit)
    assert parent.status is RunStatus.AWAITING_HUMAN
    assert parent.escalated_for == "child_waits"
    assert waiting_run(parent) == kid  # the person answers the child
    assert f"its run {kid} waits for a person" in parent.detail

    child = unit.state(kid)
    unit.app.engine.take(
        kid, Decided("test", lambda s: controls.resume(s, by="pat", escalation=child.escalation))
    )
    unit.drive()
    assert unit.state(PARENT).status is RunStatus.COMPLETED
    assert unit.types(PARENT).count("RunResumed") == 1


def test_a_template_naming_a_stage_that_never_ran_ends_the_flow_failed_by_name(unit: Unit) -> None:
    orphan = {"id": "orphan", "call": {"tool": "kv_read", "input": {"key": "{later.result.k}"}}}
    later = {"id": "later", "call": {"tool": "kv_read", "input": {"key": "x"}}}
    unit.create(PARENT, flow_spec(orphan, later))
    unit.drive()

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.FAILED
    assert parent.detail == "stage 'orphan': {later.result.k}: stage 'later' has no result yet"
    assert children(unit) == []


def test_a_flow_out_of_wall_clock_stops_its_live_child_and_still_counts_its_spend(
    unit: Unit,
) -> None:
    spec = flow_spec(FIRST, CHECK).model_copy(
        update={"budgets": flow_spec(FIRST).budgets.model_copy(update={"max_wall_clock_s": 60})}
    )
    unit.create(PARENT, spec)
    unit.drive(until=lambda u: len(children(u)) == 1)
    [kid] = children(unit)
    assert unit.state(PARENT).flow.child_spec.budgets.max_wall_clock_s == 60  # type: ignore[union-attr]
    unit.clock.advance(61)
    unit.app.engine.take(PARENT, Decided("sweeper", lambda s: on_tick(s, now=unit.clock.now())))
    unit.drive()

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.TIMEOUT
    # its own clock (the flow's, held) or the flow's stop: it never outlives the flow
    assert unit.state(kid).status in (RunStatus.TIMEOUT, RunStatus.CANCELLED)
    assert unit.types(PARENT)[-2:] == ["RunTimedOut", "ChildRunEnded"]  # recorded after its end
    assert parent.usage == unit.state(kid).usage


def test_a_run_squatting_the_id_of_a_flows_child_is_never_taken_for_it(unit: Unit) -> None:
    """A publisher may choose a run id: one that names the child a flow will start is
    another run, whose results must never flow into the flow's templates."""
    squat = "r-flow.first.1.s0"
    unit.create(squat, spec({"tool_use": [call("s1", "kv_delete", key="a")]},
                            {"end_turn": '{"summary": "{input.task}", "key": "evil"}'}))  # fmt: skip
    unit.drive()
    unit.create(PARENT, flow_spec(FIRST, CHECK))
    unit.drive()

    parent = unit.state(PARENT)
    assert parent.status is RunStatus.FAILED
    assert parent.detail == "stage 'first': the id of its run r-flow.first.1.s0 is another run's"
    assert "ChildRunEnded" not in unit.types(PARENT)
    assert parent.usage == Usage()
    # the other run is neither taken for the child nor stopped with the flow
    assert unit.state(squat).status is RunStatus.AWAITING_APPROVAL
    assert "RunCancelRequested" not in unit.types(squat)


def test_a_stage_is_offered_only_its_own_modules_tools_and_cannot_call_others(
    unit: Unit,
) -> None:
    """The worker serves the flow's whole tool set; a stage's child sees, and may call,
    only the tools of the modules its stage names (and the built-in ones)."""
    assert unit.app.toolset.offered(["other_module"])  # the built-in ones, always
    assert {t.name for t in unit.app.toolset.offered(["other_module"])} & {"kv_write"} == set()
    narrow = {"id": "narrow", "agent": {"task": "t", "tools": [], "model": {"scripted": [
        {"tool_use": [call("n1", "kv_write", key="a", value="1")]}, {"end_turn": "done"}]}}}  # fmt: skip
    unit.create(PARENT, flow_spec(narrow))
    unit.drive()

    [kid] = children(unit)
    rejected = unit.state(kid).turns[0].calls[0]
    assert rejected.status.value == "rejected" and rejected.error is not None
    assert rejected.error.code == "unknown_tool"
    assert "n1" not in unit_tools.RAN
