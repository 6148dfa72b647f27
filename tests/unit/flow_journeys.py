"""Legal journeys of a flow's own run (`journeys.JOURNEYS` takes them in): its stages
started, ended and routed through the decisions of `agentledger.events.flow_step`, a
gate approved, denied and replied, a stage routed on its child's wait, the flow cancelled with a child running, and the ends an
operator or a budget appends (a child that ends after its parent did still reports)."""

from __future__ import annotations

from collections.abc import Callable

from runlog import Log

from agentledger.events import controls
from agentledger.events.flow_step import start
from agentledger.events.status import RunStatus
from agentledger.events.types import (
    ChildRunEnded,
    Event,
    RunBudgetExhausted,
    RunFailed,
    RunTimedOut,
)
from agentledger.schemas.content import Usage
from agentledger.schemas.spec import RunSpec

R = RunStatus
AGENT = {
    "id": "fix",
    "agent": {"task": "fix {input.task}", "model": {"scripted": [{"end_turn": "ok"}]}},
}
GATE = {"id": "signoff", "human": {"question": "merge {fix.result.summary}?"}}
CALL = {"id": "merge", "call": {"tool": "write_file", "input": {"path": "{fix.result.summary}"}}}


def flow_spec() -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "the flow",
            "tools": ["unit_tools"],
            "principal": {"id": "alice", "tenant": "acme", "scopes": ["fs:write"]},
            "budgets": {"max_turns": 20},
            "flow": [AGENT, GATE, CALL],
        }
    )


def child_ended(log: Log, outcome: str, **result: object) -> list[Event]:
    flow = log.s.flow
    assert flow is not None and flow.child is not None
    status = "completed" if outcome in ("completed", "succeeded") else "failed"
    return log.step(
        ChildRunEnded(
            stage=flow.stage, attempt=flow.attempt, child_run_id=flow.child, outcome=outcome,
            status=status, result=dict(result), usage=Usage(input_tokens=10, output_tokens=2),
            turns=1,
        )
    )  # fmt: skip


def started() -> Log:
    log = Log.created(flow_spec())
    log.decide(start)
    return log


def at_gate() -> Log:
    log = started()
    child_ended(log, "completed", summary="calc.py")
    assert log.s.status is R.AWAITING_HUMAN
    return log


def gate_approved_then_completed() -> Log:
    log = at_gate()
    log.decide(controls.resume, by="pat", escalation=log.s.escalation)
    child_ended(log, "succeeded", written=True)
    return log


def gate_denied() -> Log:
    log = at_gate()
    log.decide(controls.abort, by="pat", escalation=log.s.escalation, note="no")
    return log


def gate_replied() -> Log:
    """A reply at a gate whose `on:` routes `replied` (to the stage after it)."""
    log = Log.created(replied_spec())
    log.decide(start)
    child_ended(log, "completed", summary="calc.py")
    log.decide(controls.reply, by="pat", text="ok {input.task}", escalation=log.s.escalation)
    child_ended(log, "succeeded", written=True)
    return log


def replied_spec() -> RunSpec:
    spec = flow_spec()
    assert spec.flow is not None
    gate = spec.flow[1].model_copy(update={"on": {"replied": "merge"}})
    return spec.model_copy(update={"flow": (spec.flow[0], gate, spec.flow[2])})


def routed_on_a_childs_wait() -> Log:
    """An agent stage routed on `awaiting_human` to the gate, which is then denied."""
    spec = flow_spec()
    assert spec.flow is not None
    fix = spec.flow[0].model_copy(update={"on": {"awaiting_human": "signoff"}})
    log = Log.created(spec.model_copy(update={"flow": (fix, *spec.flow[1:])}))
    log.decide(start)
    child_ended(log, "awaiting_human", summary="the model refused")
    log.decide(controls.abort, by="pat", escalation=log.s.escalation, note="no")
    return log


def cancelled_with_a_child() -> Log:
    log = started()
    log.decide(controls.cancel, by="pat", source="cli")
    child_ended(log, "cancelled")
    return log


def cancelled_before_a_stage() -> Log:
    log = Log.created(flow_spec())
    log.decide(controls.cancel, by="pat", source="cli")
    return log


def ended_with_a_child_then_it_ends(ending: Event) -> Callable[[], Log]:
    def journey() -> Log:
        log = started()
        log.append(ending)  # an operator's, the wall clock's, or a budget's
        child_ended(log, "completed", summary="late")
        return log

    return journey


FLOW_JOURNEYS: dict[str, tuple[Callable[[], Log], RunStatus]] = {
    "flow_gate_approved_then_completed": (gate_approved_then_completed, R.COMPLETED),
    "flow_gate_denied": (gate_denied, R.FAILED),
    "flow_gate_replied": (gate_replied, R.COMPLETED),
    "flow_routed_on_a_childs_wait": (routed_on_a_childs_wait, R.FAILED),
    "flow_cancelled_with_a_child": (cancelled_with_a_child, R.CANCELLED),
    "flow_cancelled_before_a_stage": (cancelled_before_a_stage, R.CANCELLED),
    "flow_failed_with_a_child": (
        ended_with_a_child_then_it_ends(RunFailed(reason="operator", detail="stopped")),
        R.FAILED,
    ),
    "flow_out_of_budget_with_a_child": (
        ended_with_a_child_then_it_ends(
            RunBudgetExhausted(budget="cost", used=2, limit=2, detail="out")
        ),
        R.BUDGET_EXHAUSTED,
    ),
    "flow_timed_out_with_a_child": (
        ended_with_a_child_then_it_ends(RunTimedOut(limit_s=5, elapsed_s=6, detail="late")),
        R.TIMEOUT,
    ),
}
