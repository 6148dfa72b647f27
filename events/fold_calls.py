"""The part of the fold that moves tool calls: each call event changes one call
of the current turn through the call table, then the run's phase follows from
its calls (unless the run is stopping or stopped, which calls do not change)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

from events.errors import IllegalTransition
from events.frozen import replace
from events.state import Call, RunState, Turn
from events.status import CallStatus, RunStatus
from events.transitions import CALL_TRANSITIONS
from events.types import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    CallEvent,
    ToolCallCancelled,
    ToolCallConfirmedNotDone,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallLeaseExpired,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallScheduled,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolCallWaiting,
    ToolError,
)

R = RunStatus
C = CallStatus
_PHASED = frozenset({R.VALIDATING, R.AWAITING_APPROVAL, R.RUNNING_TOOLS})


def call_proposed(s: RunState, e: ToolCallProposed) -> RunState:
    turn = s.current_turn
    if turn is None or turn.index != e.turn or turn.call(e.call_id) is not None:
        raise IllegalTransition(s.status, e.type, s.run_id, f"call {e.call_id!r} in turn {e.turn}")
    call = Call(call_id=e.call_id, turn=e.turn, name=e.name, input=e.input, status=C.PROPOSED)
    return replace(s, current_turn=replace(turn, calls=turn.calls + (call,)))


def call_changed(s: RunState, e: CallEvent) -> RunState:
    """Move one call of the current turn through the call table, then the run."""
    turn = s.current_turn
    call = turn.call(e.call_id) if turn else None
    if turn is None or call is None:
        raise IllegalTransition(s.status, e.type, s.run_id, f"unknown call {e.call_id!r}")
    to = CALL_TRANSITIONS.get((call.status, type(e)))
    if to is None:
        raise IllegalTransition(call.status, e.type, s.run_id, f"call {e.call_id!r}")
    moved = replace(call, status=to, **_changes(e)(call))
    turn = replace(turn, calls=tuple(moved if c.call_id == e.call_id else c for c in turn.calls))
    status = phase(turn) if s.status in _PHASED else s.status
    return replace(s, current_turn=turn, status=status)


def phase(turn: Turn | None) -> RunStatus:
    """Where a turn's calls put the run."""
    if turn is None or turn.finished:
        return R.REQUESTING_MODEL
    if any(c.status is C.PROPOSED for c in turn.calls):
        return R.VALIDATING
    if any(c.status is C.AWAITING_APPROVAL for c in turn.calls):
        return R.AWAITING_APPROVAL
    return R.RUNNING_TOOLS


def _changes(e: CallEvent) -> Callable[[Call], dict[str, Any]]:
    """What the event changes in its call, besides the status (from the call table)."""
    match e:
        case ToolCallValidated() | ApprovalRequested():
            expires = e.expires_at if isinstance(e, ApprovalRequested) else None
            return lambda c: dict(
                read_only=e.read_only, reads=e.reads, writes=e.writes, timeout_s=e.timeout_s,
                max_concurrency=e.max_concurrency, approval_expires_at=expires,
                op_key=e.op_key, request_hash=e.request_hash, resolvable=e.resolvable, output_cap=e.output_cap,
            )  # fmt: skip
        case ApprovalGranted():
            return lambda c: dict(approval_expires_at=None)
        case ApprovalDenied():
            return lambda c: dict(approval_expires_at=None, error=_denied(e))
        case ToolCallRejected():
            return lambda c: dict(error=e.error)
        case ToolCallWaiting():
            return lambda c: dict(lock_request=e.request_id)
        case ToolCallScheduled():
            return lambda c: dict(lock_request=e.request_id, tokens=e.tokens)
        case ToolCallLeaseExpired():
            return lambda c: dict(
                tokens=None if c.status is C.SCHEDULED else c.tokens, expiries=c.expiries + 1
            )
        case ToolCallStarted():
            return lambda c: dict(
                attempts=e.attempt,
                claim_deadline=e.deadline_at,
                claimed_by=e.worker,
                started_at=e.claimed_at,
            )
        case ToolCallSucceeded():
            return _ended(
                started_at=e.started_at, finished_at=e.finished_at, output=e.output,
                overflow=e.overflow,
            )  # fmt: skip
        case ToolCallFailed():
            return _ended(started_at=e.started_at, finished_at=e.finished_at, error=e.error)
        case ToolCallOutcomeUnknown():
            return lambda c: {}  # the claim's deadline stays: resolution waits for it
        case ToolCallConfirmedNotDone():
            return lambda c: dict(tokens=None)
        case ToolCallCancelled():
            return _ended(finished_at=e.stopped_at, error=_stopped("cancelled", e.stopped_at))
        case ToolCallForceTerminated():
            error = _stopped("force_terminated", e.terminated_at)
            return _ended(finished_at=e.terminated_at, error=error)
        case _:
            assert_never(e)


def _ended(**changes: Any) -> Callable[[Call], dict[str, Any]]:
    return lambda c: {"claim_deadline": None, **changes}


def _denied(e: ApprovalDenied) -> ToolError:
    why = "the approval request expired" if e.expired else f"denied by {e.by}"
    note = f": {e.note}" if e.note else ""
    return ToolError(
        code="permission_denied", message=f"{why}{note}; the tool did not run", retryable=False
    )


def _stopped(how: str, at: float) -> ToolError:
    message = f"the call was {how.replace('_', ' ')} because the run was cancelled"
    return ToolError(code="internal", message=message, retryable=False)
