"""The decisions of a flow, from its run's state alone: start the current stage (its
child run, or its gate), record a child's end, and route a stage's outcome. Routing
and the next stage's start are decided together, as the follow-up of whatever gave
a stage its outcome (`agentledger.events.settle`); time is the state's own (the
batch's), so a decision made again on the same state is the same.

A route is the stage's `on:` for its outcome; with none, a success goes on to the
next stage and anything else ends the flow. `next` is the stage after it; `stop`,
or `next` from the last stage, ends the flow: `completed` after a success, `failed`
otherwise. A route back (to the stage itself or one before it in the list) is a
loop: past `max_loops` loops the flow ends `failed` instead."""

from __future__ import annotations

from typing import Any

from agentledger.events.counted import counted
from agentledger.events.flow_children import (
    child_id,
    child_spec,
    context_of,
    left_of,
    spent,
    stage_outcome,
    stage_result,
)
from agentledger.events.flow_events import ChildRunEnded, ChildRunStarted, FlowRouted
from agentledger.events.flow_state import FlowPhase, FlowState
from agentledger.events.flow_template import TemplateError, as_text, render
from agentledger.events.frozen import replace
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import (
    BudgetName,
    Event,
    RunBudgetExhausted,
    RunCompleted,
    RunEscalated,
    RunFailed,
    RunResumed,
    RunTimedOut,
)
from agentledger.schemas.flow_spec import NEXT, STOP, SUCCESS, Stage

P = FlowPhase
EVIDENCE_CHARS = 300  # of each stage's result, in a gate's question
_BUDGETS: dict[str, BudgetName] = {
    "max_turns": "turns", "max_input_tokens": "input_tokens",
    "max_output_tokens": "output_tokens", "max_cost_usd": "cost",
}  # fmt: skip


def stage_of(s: RunState, stage_id: str) -> Stage:
    assert s.spec.flow is not None
    return next(st for st in s.spec.flow if st.id == stage_id)


def flow_due(s: RunState) -> FlowState | None:
    """The flow of a run whose flow moves on (None: it has none, or it does not)."""
    if s.flow is None or s.status is not RunStatus.FLOWING:
        return None
    return s.flow


def child_live(s: RunState) -> bool:
    """A stage's child run goes on: a cancelled flow waits for its end."""
    return s.flow is not None and s.flow.phase is P.IN_CHILD and s.flow.child is not None


def start(s: RunState) -> list[Event]:
    """The current stage's start: its child run, or its gate ([] when not due). A
    flow with nothing left of a budget ends here, never starting a child."""
    flow = flow_due(s)
    if flow is None or flow.phase is not P.STARTING:
        return []
    stage, now = stage_of(s, flow.stage), s.updated_at
    if (out := _out_of_budget(s, flow, now=now)) is not None:
        return [out]
    if stage.human is not None:
        try:
            question = render(stage.human.question, context_of(s, flow))
        except TemplateError as exc:
            return [RunFailed(reason="flow_template", detail=f"stage {stage.id!r}: {exc}")]
        return [RunEscalated(reason="flow_gate", detail=f"{question}{_evidence(flow)}")]
    attempt = flow.entered(stage.id) + 1
    try:
        spec = child_spec(s, stage, flow, attempt=attempt, now=now)
    except TemplateError as exc:
        return [RunFailed(reason="flow_template", detail=f"stage {stage.id!r}: {exc}")]
    child = child_id(s.run_id, stage.id, attempt)
    return [ChildRunStarted(stage=stage.id, attempt=attempt, child_run_id=child, spec=spec)]


def owns(s: RunState, found: RunState) -> bool:
    """`found` is the child the flow started for its current stage (its own `RunCreated`
    says so), not a run that merely holds that id."""
    flow = s.flow
    return (
        flow is not None and flow.child == found.run_id
        and found.parent_run_id == s.run_id and found.stage == flow.stage
    )  # fmt: skip


def squatted(s: RunState, found: RunState) -> list[Event]:
    """A run holding the id of the flow's child that is not its child (its `RunCreated`
    names no such parent and stage: a publisher chose the id) is never taken for it —
    its results would flow into this flow's templates: the flow ends `failed`."""
    flow = s.flow
    if flow is None or s.status.terminal or owns(s, found):
        return []
    detail = f"stage {flow.stage!r}: the id of its run {found.run_id} is another run's"
    return [RunFailed(reason="child_id_taken", detail=detail)]


def surfaced(s: RunState, child: RunState) -> list[Event]:
    """A stage's child that waits for a person puts its flow's run in wait too, naming
    it (`child_waits`); once it goes on, so does the flow ([] when nothing changes)."""
    flow = s.flow
    if flow is None or flow.child != child.run_id or flow.phase is not P.IN_CHILD:
        return []
    if s.status is RunStatus.FLOWING and child.status.waiting:
        if "awaiting_human" in stage_of(s, flow.stage).on:
            return [_waits(flow, child)]  # routed on its wait: the child is then cancelled
        what = "an approval" if child.status is RunStatus.AWAITING_APPROVAL else "a person"
        detail = f"stage {flow.stage!r}: its run {child.run_id} waits for {what}: {child.detail}"
        return [RunEscalated(reason="child_waits", detail=detail.rstrip(": "))]
    if s.status is RunStatus.AWAITING_HUMAN and s.escalated_for == "child_waits":
        if not child.status.waiting:
            return [RunResumed(by="agentledger", note=f"stage {flow.stage!r}'s run goes on")]
    return []


def _waits(flow: FlowState, child: RunState) -> ChildRunEnded:
    """The stage's outcome when its child waits for a person and `on:` routes
    `awaiting_human`: what the child asked, and what it spent (a waiting run spends
    nothing more; `left_waiting` names it to be cancelled)."""
    return ChildRunEnded(
        stage=flow.stage, attempt=flow.attempt, child_run_id=child.run_id,
        outcome="awaiting_human", status=str(child.status),
        result={"summary": child.detail, "run": child.run_id}, usage=child.usage,
        cost_usd=child.cost_usd, turns=child.turns_used, detail=child.detail,
    )  # fmt: skip


def left_waiting(s: RunState) -> list[str]:
    """The children the flow routed on their wait for a person, to be cancelled (their
    end recorded in their own logs; the flow has recorded their spend already)."""
    flow = s.flow
    if flow is None:
        return []
    live = flow.child if flow.phase is P.IN_CHILD else None
    waited = [st for st, outcome in flow.outcomes if outcome == "awaiting_human"]
    left = [child_id(s.run_id, st, flow.entered(st)) for st in waited]
    return [c for c in left if c != live]


def takes_reply(s: RunState) -> bool:
    """The flow waits at a gate whose `on:` routes `replied`: a reply answers it."""
    if s.escalated_for != "flow_gate" or s.flow is None:
        return False
    return "replied" in stage_of(s, s.flow.stage).on


def waiting_run(s: RunState) -> str:
    """The run a person answers for `s` to go on: its waiting child's, or its own."""
    if s.escalated_for == "child_waits" and s.flow is not None and s.flow.child is not None:
        return s.flow.child
    return s.run_id


def ended(s: RunState, child: RunState) -> list[Event]:
    """The stage's child ended: its outcome, result and spend ([] when the child is not
    the flow's current one, or goes on)."""
    flow = s.flow
    if flow is None or flow.child != child.run_id or flow.phase is not P.IN_CHILD:
        return []
    if not child.status.terminal:
        return []
    kind = stage_of(s, flow.stage).kind
    return [
        ChildRunEnded(
            stage=flow.stage, attempt=flow.attempt, child_run_id=child.run_id,
            outcome=stage_outcome(kind, child), status=str(child.status),
            result=stage_result(kind, child), usage=child.usage, cost_usd=child.cost_usd,
            turns=child.turns_used, detail=child.detail,
        )
    ]  # fmt: skip


def route(s: RunState) -> list[Event]:
    """Where the current stage's outcome leads, and that stage's start ([] when no
    outcome waits for its route)."""
    flow = flow_due(s)
    if flow is None or flow.phase is not P.ROUTING or flow.outcome is None:
        return []
    stage, outcome = stage_of(s, flow.stage), flow.outcome
    ok = outcome in SUCCESS
    target = stage.on.get(outcome, NEXT if ok else STOP)
    to = _next_of(s, stage.id) if target == NEXT else None if target == STOP else target
    loop = to is not None and _place(s, to) <= _place(s, stage.id)
    routed = FlowRouted(stage=stage.id, outcome=outcome, to=to, loop=loop)
    if loop and flow.loops >= s.spec.max_loops:
        told = (
            f"stage {stage.id!r} {outcome} -> {to!r} once more than max_loops ({s.spec.max_loops})"
        )
        if why := _why(flow.result(stage.id)):
            told = f"{told}; its last {outcome}: {why}"
        return [FlowRouted(stage=stage.id, outcome=outcome, to=None), RunFailed(
            reason="max_loops", detail=told)]  # fmt: skip
    if to is None:
        return [routed, _end(s, stage.id, outcome, ok)]
    return [routed, *start(_routed_state(s, flow, to, loop))]  # decided on the routed flow


def _routed_state(s: RunState, flow: FlowState, to: str, loop: bool) -> RunState:
    moved = replace(flow, phase=P.STARTING, stage=to, outcome=None, child=None,
                    loops=flow.loops + int(loop))  # fmt: skip
    return replace(s, flow=moved)


def _place(s: RunState, stage_id: str) -> int:
    assert s.spec.flow is not None
    return [st.id for st in s.spec.flow].index(stage_id)


def _next_of(s: RunState, stage_id: str) -> str | None:
    assert s.spec.flow is not None
    ids = [st.id for st in s.spec.flow]
    i = ids.index(stage_id)
    return ids[i + 1] if i + 1 < len(ids) else None


def _end(s: RunState, stage: str, outcome: str, ok: bool) -> Event:
    flow = s.flow
    assert flow is not None
    stages = counted(sum(n for _, n in flow.entries), "stage")
    if ok:
        return RunCompleted(detail=f"the flow completed: {stages} run, last {stage!r} {outcome}")
    detail = f"stage {stage!r} {outcome}"
    why = _why(flow.result(stage))
    return RunFailed(reason=f"stage_{outcome}", detail=f"{detail}: {why}" if why else detail)


def _why(result: dict[str, Any] | None) -> str:
    """What a failed stage's result says of why (a call's error, a gate's note)."""
    result = result or {}
    return as_text(result.get("error") or result.get("note") or "")[:EVIDENCE_CHARS]


def _out_of_budget(s: RunState, flow: FlowState, *, now: float) -> Event | None:
    left = left_of(s, flow, now=now)
    name = spent(left)
    if name is None:
        return None
    limit = getattr(s.spec.budgets, name)
    used = limit - left[name]
    what = f"the flow's children used {used:g} of {limit:g} ({name}) before stage {flow.stage!r}"
    if name == "max_wall_clock_s":
        return RunTimedOut(limit_s=limit, elapsed_s=used, detail=what)
    return RunBudgetExhausted(budget=_BUDGETS[name], used=used, limit=limit, detail=what)


def _evidence(flow: FlowState) -> str:
    """What the stages so far came to, for the person at a gate."""
    told = [
        f"{stage} {flow.outcome_of(stage)}: {as_text(result)[:EVIDENCE_CHARS]}"
        for stage, result in flow.results
    ]
    return (" — evidence: " + "; ".join(told)) if told else ""
