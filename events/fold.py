"""`apply(state, envelope) -> state` and `fold(envelopes)`: the only way to get a
run's state. One small function per event; every move is checked against the
transition tables, so a corrupted log fails loudly instead of folding wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, assert_never

from events.errors import BrokenLog, IllegalTransition
from events.state import Call, Check, RunState, Turn
from events.status import CallStatus, RunStatus
from events.transitions import CALL_TRANSITIONS, RUN_TRANSITIONS
from events.types import (
    AcceptanceChecked,
    AcceptanceFailed,
    AcceptanceStarted,
    Event,
    ModelRequested,
    ModelResponded,
    RunBudgetExhausted,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
)
from schemas.envelope import Envelope

R = RunStatus


def fold(envelopes: Iterable[Envelope[Any]], state: RunState | None = None) -> RunState | None:
    for envelope in envelopes:
        state = apply(state, envelope)
    return state


def apply(state: RunState | None, envelope: Envelope[Any]) -> RunState:
    event: Event = envelope.data
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
        new = _step(state, event)
    old_status = state.status if state else None
    if (old_status, event.type, new.status) not in RUN_TRANSITIONS:
        raise IllegalTransition(old_status, event.type, envelope.run_id)
    return replace(new, seq=envelope.seq, updated_at=envelope.at)


def _step(s: RunState, e: Event) -> RunState:
    match e:
        case RunCreated():
            raise IllegalTransition(s.status, e.type, s.run_id, "the run already exists")
        case ModelRequested():
            return replace(s, model_attempts=e.attempt, model_claim_deadline=e.deadline_at)
        case ModelResponded():
            return _model_responded(s, e)
        case ToolCallProposed():
            return _call_proposed(s, e)
        case ToolCallValidated():
            return _call(
                s,
                e,
                lambda c: replace(
                    c, read_only=e.read_only, reads=e.reads, writes=e.writes, timeout_s=e.timeout_s
                ),
            )
        case ToolCallRejected():
            return _call(s, e, lambda c: replace(c, error=e.error))
        case ToolCallStarted():
            return _call(
                s, e, lambda c: replace(c, attempts=e.attempt, claim_deadline=e.deadline_at)
            )
        case ToolCallSucceeded():
            return _call(
                s,
                e,
                lambda c: replace(
                    c,
                    output=e.output,
                    started_at=e.started_at,
                    finished_at=e.finished_at,
                    claim_deadline=None,
                ),
            )
        case ToolCallFailed():
            return _call(
                s,
                e,
                lambda c: replace(
                    c,
                    error=e.error,
                    started_at=e.started_at,
                    finished_at=e.finished_at,
                    claim_deadline=None,
                ),
            )
        case ToolCallOutcomeUnknown():
            return _call(s, e, lambda c: replace(c, claim_deadline=None))
        case AcceptanceStarted():
            return replace(
                s, acceptance_attempts=e.attempt, acceptance_claim_deadline=e.deadline_at
            )
        case AcceptanceChecked():
            check = Check(e.index, e.check, e.passed, e.evidence, e.checked_at)
            return replace(s, checks=s.checks + (check,))
        case AcceptanceFailed():
            return _acceptance_failed(s, e)
        case RunCompleted():
            return replace(s, status=R.COMPLETED, detail=e.detail)
        case RunFailed():
            return replace(s, status=R.FAILED, detail=e.detail)
        case RunBudgetExhausted():
            return replace(s, status=R.BUDGET_EXHAUSTED, detail=e.detail)
        case RunEscalated():
            return replace(s, status=R.AWAITING_HUMAN, detail=e.detail)
        case _:
            assert_never(e)


def _created(run_id: str, e: RunCreated, at: float) -> RunState:
    return RunState(
        run_id=run_id,
        status=R.REQUESTING_MODEL,
        spec=e.spec,
        workspace=e.workspace,
        base_dir=e.base_dir,
        request_id=e.request_id,
        created_at=at,
    )


_AFTER_REPLY = {"tool_use": R.VALIDATING, "end_turn": R.ACCEPTING, "stop_sequence": R.ACCEPTING}


def _model_responded(s: RunState, e: ModelResponded) -> RunState:
    if e.turn != s.turns_used + 1:
        raise IllegalTransition(s.status, e.type, s.run_id, f"turn {e.turn} follows {s.turns_used}")
    turn = Turn(index=e.turn, content=e.content, stop_reason=e.stop_reason, model=e.model)
    status = _AFTER_REPLY.get(e.stop_reason, s.status)
    return replace(
        s,
        status=status,
        history=s.history.append(s.current_turn) if s.current_turn else s.history,
        current_turn=turn,
        usage=s.usage + e.usage,
        model_claim_deadline=None,
        model_attempts=0,
        checks=(),
        acceptance_attempts=0,
    )


def _call_proposed(s: RunState, e: ToolCallProposed) -> RunState:
    turn = s.current_turn
    if turn is None or turn.index != e.turn or turn.call(e.call_id) is not None:
        raise IllegalTransition(s.status, e.type, s.run_id, f"call {e.call_id!r} in turn {e.turn}")
    call = Call(
        call_id=e.call_id, turn=e.turn, name=e.name, input=e.input, status=CallStatus.PROPOSED
    )
    return _with_turn(s, replace(turn, calls=turn.calls + (call,)))


def _call(s: RunState, e: Any, change: Callable[[Call], Call]) -> RunState:
    """Move one call of the current turn through the call table, then the run."""
    turn = s.current_turn
    call = turn.call(e.call_id) if turn else None
    if turn is None or call is None:
        raise IllegalTransition(s.status, e.type, s.run_id, f"unknown call {e.call_id!r}")
    to = CALL_TRANSITIONS.get((call.status, e.type))
    if to is None:
        raise IllegalTransition(call.status, e.type, s.run_id, f"call {e.call_id!r}")
    moved = replace(change(call), status=to)
    turn = replace(turn, calls=tuple(moved if c.call_id == e.call_id else c for c in turn.calls))
    return replace(_with_turn(s, turn), status=_status_after_calls(s.status, turn))


def _status_after_calls(status: RunStatus, turn: Turn) -> RunStatus:
    if turn.finished:
        return R.REQUESTING_MODEL
    if status is R.VALIDATING and all(c.status is not CallStatus.PROPOSED for c in turn.calls):
        return R.RUNNING_TOOLS
    return status


def _with_turn(s: RunState, turn: Turn) -> RunState:
    return replace(s, current_turn=turn)


def _acceptance_failed(s: RunState, e: AcceptanceFailed) -> RunState:
    turn = s.current_turn
    if turn is None:
        raise IllegalTransition(s.status, e.type, s.run_id, "no turn to give feedback on")
    return replace(
        _with_turn(s, replace(turn, feedback=e.feedback)),
        status=R.REQUESTING_MODEL,
        acceptance_claim_deadline=None,
    )
