"""The fold of a flow's events into its run's state (`RunState.flow`), each move checked
against the flow's table (`agentledger.events.flow_state.FLOW_TRANSITIONS`). A child's
end adds its spend to the parent's: the parent's usage and cost are its children's
sum, to the token. A gate is the run's own escalation: its answer (`RunResumed`:
approved, `RunAborted`: denied, `HumanReplied`: replied, its text the gate's result) puts the run back to `flowing`, to be routed."""

from __future__ import annotations

from agentledger.events.errors import IllegalTransition
from agentledger.events.flow_events import ChildRunEnded, ChildRunStarted, FlowRouted
from agentledger.events.flow_state import FLOW_TRANSITIONS, FlowPhase, FlowState, with_item
from agentledger.events.frozen import replace
from agentledger.events.run_events import HumanReplied, RunAborted, RunEscalated, RunResumed
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus

P = FlowPhase
GateEvent = RunEscalated | RunResumed | RunAborted | HumanReplied


def flow_of(s: RunState, event: object, to: FlowPhase) -> FlowState:
    """The run's flow, if the move of `event` to `to` is in the flow's table."""
    flow = s.flow
    if flow is None:
        raise IllegalTransition(s.status, type(event).__name__, s.run_id, "the run has no flow")
    if (flow.phase, type(event), to) not in FLOW_TRANSITIONS:
        raise IllegalTransition(
            s.status, type(event).__name__, s.run_id, f"the flow is {flow.phase}"
        )
    return flow


def child_started(s: RunState, e: ChildRunStarted, at: float) -> RunState:
    flow = flow_of(s, e, P.IN_CHILD)
    if e.stage != flow.stage or e.attempt != flow.entered(e.stage) + 1:
        raise IllegalTransition(
            s.status, e.type, s.run_id, f"stage {e.stage!r} attempt {e.attempt} is not due"
        )
    entries = with_item(flow.entries, e.stage, e.attempt)
    moved = replace(
        flow,
        phase=P.IN_CHILD,
        attempt=e.attempt,
        child=e.child_run_id,
        entries=entries,
        child_spec=e.spec,
    )
    return replace(s, flow=moved)


def child_ended(s: RunState, e: ChildRunEnded, at: float) -> RunState:
    flow = flow_of(s, e, P.ROUTING)
    if e.child_run_id != flow.child:
        raise IllegalTransition(s.status, e.type, s.run_id, f"{e.child_run_id!r} is not running")
    moved = replace(
        flow, phase=P.ROUTING, outcome=e.outcome, turns=flow.turns + e.turns,
        results=with_item(flow.results, e.stage, e.result),
        outcomes=with_item(flow.outcomes, e.stage, e.outcome),
    )  # fmt: skip
    return replace(s, flow=moved, usage=s.usage + e.usage, cost_usd=s.cost_usd + e.cost_usd)


def late_child_ended(s: RunState, e: ChildRunEnded, at: float) -> RunState:
    """A child that ended after its parent did (cancelled, timed out): its spend is
    still the parent's; the flow does not move any more."""
    flow = s.flow
    if flow is None or e.child_run_id != flow.child:
        raise IllegalTransition(s.status, e.type, s.run_id, f"{e.child_run_id!r} is not running")
    moved = replace(flow, child=None, turns=flow.turns + e.turns)
    return replace(s, flow=moved, usage=s.usage + e.usage, cost_usd=s.cost_usd + e.cost_usd)


def routed(s: RunState, e: FlowRouted, at: float) -> RunState:
    to = P.STARTING if e.to is not None else P.ENDED
    flow = flow_of(s, e, to)
    if e.stage != flow.stage or e.outcome != flow.outcome:
        raise IllegalTransition(s.status, e.type, s.run_id, f"stage {e.stage!r} is not routed")
    moved = replace(
        flow, phase=to, stage=e.to or flow.stage, outcome=None, child=None,
        loops=flow.loops + e.loop,
    )  # fmt: skip
    return replace(s, flow=moved)


def at_gate(before: RunState, s: RunState, e: GateEvent) -> RunState:
    """`s` (the run's own fold of `e`) with the flow's gate moved: asked, or answered."""
    flow = before.flow
    assert flow is not None
    if isinstance(e, RunEscalated):
        if e.reason != "flow_gate":
            return s  # a child's trouble is the child's; the flow's own run asks only at gates
        flow_of(before, e, P.AT_GATE)
        attempt = flow.entered(flow.stage) + 1
        entries = with_item(flow.entries, flow.stage, attempt)
        return replace(s, flow=replace(flow, phase=P.AT_GATE, attempt=attempt, entries=entries))
    if flow.phase is not P.AT_GATE:  # an escalation that was no gate's (an operator's)
        return replace(s, status=RunStatus.FLOWING) if isinstance(e, RunResumed) else s
    flow_of(before, e, P.ROUTING)
    outcome, result = _answer(e)
    moved = replace(
        flow, phase=P.ROUTING, outcome=outcome,
        results=with_item(flow.results, flow.stage, result),
        outcomes=with_item(flow.outcomes, flow.stage, outcome),
    )  # fmt: skip
    return replace(s, flow=moved, status=RunStatus.FLOWING)


def _answer(e: RunResumed | RunAborted | HumanReplied) -> tuple[str, dict[str, str]]:
    """A gate's outcome and result: who answered, and their note or reply (data: a later
    template puts it in as text, never reads it as a template)."""
    if isinstance(e, HumanReplied):
        return "replied", {"by": e.by, "reply": e.text}
    return ("approved" if isinstance(e, RunResumed) else "denied"), {"by": e.by, "note": e.note}
