"""`apply(state, envelope) -> state` and `fold(envelopes)`: the only way to get a
run's state. One small function per event; every move is checked against the
transition tables, so a corrupted log fails loudly instead of folding wrong.
Call events are folded in `fold_calls`; `STEPS` at the end says which function folds
each event class."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, get_args

from agentledger.events import frozen
from agentledger.events.causes import ACCEPTANCE_FAILED, acceptance_failure, after_acceptance
from agentledger.events.errors import BrokenLog, IllegalTransition
from agentledger.events.flow_events import ChildRunEnded, ChildRunStarted, FlowRouted
from agentledger.events.flow_state import FlowPhase, FlowState
from agentledger.events.fold_calls import call_changed, call_proposed, phase
from agentledger.events.fold_flow import (
    GateEvent,
    at_gate,
    child_ended,
    child_started,
    late_child_ended,
    routed,
)
from agentledger.events.frozen import fill, replace
from agentledger.events.pricing import cost_usd, price_of
from agentledger.events.run_caps import held_detail
from agentledger.events.state import Call, Check, RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.stop_reasons import status_after_reply
from agentledger.events.transitions import RUN_TRANSITIONS
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    CallEvent,
    Event,
    HumanReplied,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunAborted,
    RunBudgetExhausted,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    RunHeld,
    RunReleased,
    RunResumed,
    RunTimedOut,
    ToolCallProposed,
    ToolSampledModel,
)
from agentledger.schemas.content import ToolUseBlock
from agentledger.schemas.envelope import Envelope

R = RunStatus


def prepare() -> None:
    """Write the copy functions of the state's classes now (`agentledger.events.frozen.prepare`)."""
    frozen.prepare(RunState, Turn, Call, Check, FlowState)


def fold(envelopes: Iterable[Envelope[Any]], state: RunState | None = None) -> RunState | None:
    for envelope in envelopes:
        state = apply(state, envelope)
    return state


def apply(state: RunState | None, envelope: Envelope[Any]) -> RunState:
    event: Event = envelope.data
    kind = type(event)
    expected = (state.seq if state else 0) + 1
    if envelope.seq != expected:
        raise BrokenLog(envelope.run_id, envelope.seq, f"expected seq {expected}")
    if state is None:
        if not isinstance(event, RunCreated):
            raise IllegalTransition(
                None, event.type, envelope.run_id, "a run starts with RunCreated"
            )
        new = _created(envelope.run_id, event, envelope.at)
    else:
        if envelope.run_id != state.run_id:
            raise BrokenLog(state.run_id, envelope.seq, f"event of run {envelope.run_id!r}")
        new = STEPS[kind](state, event, envelope.at)
        if state.flow is not None and isinstance(event, GateEvent):
            new = at_gate(state, new, event)
    old_status = state.status if state else None
    if (old_status, kind, new.status) not in RUN_TRANSITIONS:
        raise IllegalTransition(old_status, event.type, envelope.run_id)
    # every step makes a new state (never hands back `state` or another held one), so
    # the stamp goes on it in place; the check keeps that true if a step ever does not
    stamp = replace if new is state else fill
    return stamp(new, seq=envelope.seq, last_event_id=envelope.id, updated_at=envelope.at)


def _created_again(s: RunState, e: RunCreated, at: float) -> RunState:
    raise IllegalTransition(s.status, e.type, s.run_id, "the run already exists")


def _model_requested(s: RunState, e: ModelRequested, at: float) -> RunState:
    first = s.model_first_attempt_at if e.attempt > 1 else None
    return replace(
        s, model_attempts=e.attempt, model_claim_deadline=e.deadline_at,
        model_first_attempt_at=at if first is None else first,
    )  # fmt: skip


def _model_request_failed(s: RunState, e: ModelRequestFailed, at: float) -> RunState:
    # the next attempt is not due before `retry_at`: the claim's deadline moves there
    # (without one a RunFailed follows in the same batch); `status` shows why it waits
    waits = f"turn {e.turn} attempt {e.attempt} failed: {e.cause}"
    if e.retry_at is not None:
        waits += f"; asked again {max(0.0, e.retry_at - at):.1f} s later"
    return replace(s, model_claim_deadline=e.retry_at, model_failed_attempt=e.attempt, detail=waits)


def _acceptance_started(s: RunState, e: AcceptanceStarted, at: float) -> RunState:
    return replace(s, acceptance_attempts=e.attempt, acceptance_claim_deadline=e.deadline_at)


def _acceptance_checked(s: RunState, e: AcceptanceChecked, at: float) -> RunState:
    check = Check(e.index, e.check, e.passed, e.evidence, e.checked_at)
    return replace(s, checks=s.checks + (check,))


def _acceptance_check_stopped(s: RunState, e: AcceptanceCheckStopped, at: float) -> RunState:
    return replace(s, acceptance_claim_deadline=None)  # recorded after the run's end


def _acceptance_failed(s: RunState, e: AcceptanceFailed, at: float) -> RunState:
    told = acceptance_failure([(c.check, c.passed, c.evidence) for c in s.checks])
    return _with_feedback(
        replace(s, acceptance_claim_deadline=None, failed_acceptance=told),
        e.type, e.feedback, R.REQUESTING_MODEL,
    )  # fmt: skip


def _human_replied(s: RunState, e: HumanReplied, at: float) -> RunState:
    if s.flow is not None:  # an answer at a flow's gate: no model to tell (`fold_flow.at_gate`)
        return _human_spoke(s)
    return _human_spoke(_with_feedback(s, e.type, f"{e.by} says: {e.text}", None))


def _resumed(s: RunState, e: RunResumed, at: float) -> RunState:
    return _human_spoke(s)


def _cancel_requested(s: RunState, e: RunCancelRequested, at: float) -> RunState:
    by = _who(e.by, e.publisher)
    return replace(s, status=R.CANCELLING, cancel_requested_at=at, cancel_by=by)


def _tool_sampled(s: RunState, e: ToolSampledModel, at: float) -> RunState:
    call = s.current_turn.call(e.call_id) if s.current_turn else None
    if call is None or call.status is not CallStatus.STARTED:
        raise IllegalTransition(s.status, e.type, s.run_id, f"call {e.call_id!r} is not running")
    if e.sample != s.samples + 1:
        raise IllegalTransition(
            s.status, e.type, s.run_id, f"sample {e.sample} follows {s.samples}"
        )
    return replace(
        s,
        usage=s.usage + e.usage,
        cost_usd=s.cost_usd + cost_usd(e.usage, price_of(e.model, s.spec.budgets.prices)),
        samples=e.sample,
    )


def _held(s: RunState, e: RunHeld, at: float) -> RunState:
    return replace(s, status=R.HELD, detail=f"held: {held_detail(e)}")


def _released(s: RunState, e: RunReleased, at: float) -> RunState:
    return replace(s, status=R.REQUESTING_MODEL, clock_from=at, detail="")


def _escalated(s: RunState, e: RunEscalated, at: float) -> RunState:
    return replace(  # the event being folded is the one after the state's seq
        s, status=R.AWAITING_HUMAN, detail=e.detail, escalated_for=e.reason,
        escalation=s.seq + 1,
    )  # fmt: skip


Ending = RunCompleted | RunFailed | RunBudgetExhausted | RunTimedOut | RunCancelled

_ENDS: dict[type, RunStatus] = {
    RunCompleted: R.COMPLETED,
    RunFailed: R.FAILED,
    RunBudgetExhausted: R.BUDGET_EXHAUSTED,
    RunTimedOut: R.TIMEOUT,
    RunCancelled: R.CANCELLED,
}


def _run_ended(s: RunState, e: Ending, at: float) -> RunState:
    return replace(s, status=_ENDS[type(e)], detail=_ended(s, e))


def _aborted(s: RunState, e: RunAborted, at: float) -> RunState:
    note = f": {e.note}" if e.note else ""
    told = f"aborted by {_who(e.by, e.publisher)}{note}"
    return replace(s, status=R.FAILED, detail=after_acceptance(s.failed_acceptance, told))


def _ended(s: RunState, e: Ending) -> str:
    """How the run's end is told: after the acceptance that failed before it, if one did
    (a run that failed acceptance says so first; its acceptance's own end says it already)."""
    if isinstance(e, RunCompleted) or (isinstance(e, RunFailed) and e.reason == ACCEPTANCE_FAILED):
        return e.detail
    return after_acceptance(s.failed_acceptance, e.detail)


def _created(run_id: str, e: RunCreated, at: float) -> RunState:
    flow = FlowState(FlowPhase.STARTING, e.spec.flow[0].id) if e.spec.flow else None
    return RunState(
        run_id=run_id,
        status=R.FLOWING if flow is not None else R.REQUESTING_MODEL,
        flow=flow,
        parent_run_id=e.parent_run_id,
        stage=e.stage,
        spec=e.spec,
        workspace=e.workspace,
        base_dir=e.base_dir,
        request_id=e.request_id,
        queue=e.queue,
        toolset=e.toolset,
        created_at=at,
        publisher=e.publisher,
    )


def _who(by: str, publisher: str | None) -> str:
    """Who spoke, and through which publisher when the inbox recorded another name."""
    return f"{by} via {publisher}" if publisher and publisher != by else by


def _model_responded(s: RunState, e: ModelResponded, at: float) -> RunState:
    if e.turn != s.turns_used + 1:
        raise IllegalTransition(s.status, e.type, s.run_id, f"turn {e.turn} follows {s.turns_used}")
    turn = Turn(index=e.turn, content=e.content, stop_reason=e.stop_reason, model=e.model)
    return replace(
        s,
        status=_after_reply(s.status, e),
        history=s.history.append(s.current_turn) if s.current_turn else s.history,
        current_turn=turn,
        usage=s.usage + e.usage,
        cost_usd=s.cost_usd + cost_usd(e.usage, price_of(e.model, s.spec.budgets.prices)),
        model_claim_deadline=None,
        model_attempts=0,
        model_first_attempt_at=None,
        model_failed_attempt=0,
        detail="" if s.model_failed_attempt else s.detail,  # the failed attempts' story is over
        checks=(),
        acceptance_attempts=0,
    )


def _after_reply(status: RunStatus, e: ModelResponded) -> RunStatus:
    if status is not R.REQUESTING_MODEL:
        return status  # a reply after a cancel is recorded and not acted on
    asks_for_tools = any(isinstance(b, ToolUseBlock) for b in e.content)
    return status_after_reply(e.stop_reason, asks_for_tools=asks_for_tools)


def _with_feedback(s: RunState, etype: str, text: str, status: RunStatus | None) -> RunState:
    turn = s.current_turn
    if turn is None:
        raise IllegalTransition(s.status, etype, s.run_id, "no turn to give feedback on")
    feedback = f"{turn.feedback}\n\n{text}" if turn.feedback else text
    return replace(s, current_turn=replace(turn, feedback=feedback), status=status or s.status)


def _human_spoke(s: RunState) -> RunState:
    """A person answered: the run resumes where its calls are, and repeats count afresh."""
    return replace(
        s,
        status=phase(s.current_turn),
        counting_from_turn=s.turns_used,
        detail="",
        escalated_for=None,
    )


def _child_ended(s: RunState, e: ChildRunEnded, at: float) -> RunState:
    if s.flow is None:  # a `delegate` call's child: its spend is the run's (events/delegate.py)
        return replace(s, usage=s.usage + e.usage, cost_usd=s.cost_usd + e.cost_usd)
    return late_child_ended(s, e, at) if s.status.terminal else child_ended(s, e, at)


E = TypeVar("E")
Step = Callable[[RunState, Any, float], RunState]  # (state, event, the event's time) -> state


def _on(kind: type[E], step: Callable[[RunState, E, float], RunState]) -> tuple[type, Step]:
    """A row of STEPS (mypy checks that the step takes the event of its row)."""
    return kind, step


STEPS: dict[type, Step] = dict(
    [
        _on(RunCreated, _created_again),
        _on(ModelRequested, _model_requested),
        _on(ModelRequestFailed, _model_request_failed),
        _on(ModelResponded, _model_responded),
        _on(ToolCallProposed, call_proposed),
        *(_on(kind, call_changed) for kind in get_args(CallEvent)),
        _on(AcceptanceStarted, _acceptance_started),
        _on(AcceptanceChecked, _acceptance_checked),
        _on(AcceptanceCheckStopped, _acceptance_check_stopped),
        _on(AcceptanceFailed, _acceptance_failed),
        _on(HumanReplied, _human_replied),
        _on(RunResumed, _resumed),
        _on(RunCancelRequested, _cancel_requested),
        _on(RunHeld, _held),
        _on(RunReleased, _released),
        _on(RunEscalated, _escalated),
        *(_on(kind, _run_ended) for kind in _ENDS),
        _on(RunAborted, _aborted),
        _on(ToolSampledModel, _tool_sampled),
        _on(ChildRunStarted, child_started),
        _on(ChildRunEnded, _child_ended),
        _on(FlowRouted, routed),
    ]
)
"""The fold's step of each event class (the state after it, before its stamp): one
dict lookup per event rather than a match over ~35 classes, on every event of every
run. Every class of the `Event` union has one (tests/unit/test_exhaustive.py)."""
