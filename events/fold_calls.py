"""The part of the fold that moves tool calls: each call event changes one call
of the current turn through the call table, then the run's phase follows from
its calls (unless the run is stopping or stopped, which calls do not change)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentledger.events.errors import IllegalTransition
from agentledger.events.frozen import replace
from agentledger.events.state import Call, RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.transitions import CALL_TRANSITIONS
from agentledger.events.types import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    CallEvent,
    ToolCallBackedOff,
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


def call_proposed(s: RunState, e: ToolCallProposed, at: float) -> RunState:
    turn = s.current_turn
    if turn is None or turn.index != e.turn or turn.call(e.call_id) is not None:
        raise IllegalTransition(s.status, e.type, s.run_id, f"call {e.call_id!r} in turn {e.turn}")
    call = Call(call_id=e.call_id, turn=e.turn, name=e.name, input=e.input, status=C.PROPOSED)
    return replace(s, current_turn=replace(turn, calls=turn.calls + (call,)))


def call_changed(s: RunState, e: CallEvent, at: float) -> RunState:
    """Move one call of the current turn through the call table, then the run (`at`,
    the event's time, stamps the few fields that keep a time: `_stamped`)."""
    turn = s.current_turn
    call = turn.call(e.call_id) if turn else None
    if turn is None or call is None:
        raise IllegalTransition(s.status, e.type, s.run_id, f"unknown call {e.call_id!r}")
    kind = type(e)
    to = CALL_TRANSITIONS.get((call.status, kind))
    if to is None:
        raise IllegalTransition(call.status, e.type, s.run_id, f"call {e.call_id!r}")
    moved = replace(call, status=to, **CHANGES[kind](call, e), **_stamped(kind, at))
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


def _checked(c: Call, e: ToolCallValidated | ApprovalRequested) -> dict[str, Any]:
    expires = e.expires_at if isinstance(e, ApprovalRequested) else None
    return {
        "read_only": e.read_only, "reads": e.reads, "writes": e.writes, "timeout_s": e.timeout_s,
        "max_concurrency": e.max_concurrency, "approval_expires_at": expires,
        "limits": tuple(sorted(e.limits.items())),
        "op_key": e.op_key, "request_hash": e.request_hash, "resolvable": e.resolvable,
        "output_cap": e.output_cap,
    }  # fmt: skip


def _granted(c: Call, e: ApprovalGranted) -> dict[str, Any]:
    return {"approval_expires_at": None}


def _denied_call(c: Call, e: ApprovalDenied) -> dict[str, Any]:
    return {"approval_expires_at": None, "error": _denied(e)}


def _rejected(c: Call, e: ToolCallRejected) -> dict[str, Any]:
    return {"error": e.error}


def _waiting(c: Call, e: ToolCallWaiting) -> dict[str, Any]:
    held = tuple(sorted(e.holders.items()))
    return {"lock_request": e.request_id, "slot_holders": held, "backed_off_until": e.closed_until}


def _backed_off(c: Call, e: ToolCallBackedOff) -> dict[str, Any]:
    return {"backed_off_until": e.until}


def _scheduled(c: Call, e: ToolCallScheduled) -> dict[str, Any]:
    return {"lock_request": e.request_id, "tokens": e.tokens}


def _lease_expired(c: Call, e: ToolCallLeaseExpired) -> dict[str, Any]:
    return {"tokens": None if c.status is C.SCHEDULED else c.tokens, "expiries": c.expiries + 1}


def _started(c: Call, e: ToolCallStarted) -> dict[str, Any]:
    return {
        "attempts": e.attempt,
        "claim_deadline": e.deadline_at,
        "claimed_by": e.worker,
        "started_at": e.claimed_at,
    }


def _succeeded(c: Call, e: ToolCallSucceeded) -> dict[str, Any]:
    return {
        "claim_deadline": None, "started_at": e.started_at, "finished_at": e.finished_at,
        "output": e.output, "overflow": e.overflow,
    }  # fmt: skip


def _failed(c: Call, e: ToolCallFailed) -> dict[str, Any]:
    return {
        "claim_deadline": None, "started_at": e.started_at, "finished_at": e.finished_at,
        "error": e.error,
    }  # fmt: skip


def _outcome_unknown(c: Call, e: ToolCallOutcomeUnknown) -> dict[str, Any]:
    return {}  # the claim's deadline stays: resolution waits for it


def _confirmed_not_done(c: Call, e: ToolCallConfirmedNotDone) -> dict[str, Any]:
    return {"tokens": None}


def _cancelled(c: Call, e: ToolCallCancelled) -> dict[str, Any]:
    error = _stopped("cancelled", e.stopped_at)
    return {"claim_deadline": None, "finished_at": e.stopped_at, "error": error}


def _force_terminated(c: Call, e: ToolCallForceTerminated) -> dict[str, Any]:
    error = _stopped("force_terminated", e.terminated_at)
    return {"claim_deadline": None, "finished_at": e.terminated_at, "error": error}


def _denied(e: ApprovalDenied) -> ToolError:
    why = "the approval request expired" if e.expired else f"denied by {e.by}"
    note = f": {e.note}" if e.note else ""
    return ToolError(
        code="permission_denied", message=f"{why}{note}; the tool did not run", retryable=False
    )


def _stopped(how: str, at: float) -> ToolError:
    message = f"the call was {how.replace('_', ' ')} because the run was cancelled"
    return ToolError(code="internal", message=message, retryable=False)


def _stamped(kind: type, at: float) -> dict[str, float]:
    """The call's times an event sets to its own (when the call queued for its locks:
    the start of its lock wait)."""
    return {"waited_at": at} if kind is ToolCallWaiting else {}


E = TypeVar("E")
Change = Callable[[Call, Any], dict[str, Any]]  # (call, event) -> its fields that change


def _on(kind: type[E], change: Callable[[Call, E], dict[str, Any]]) -> tuple[type, Change]:
    """A row of CHANGES (mypy checks that the function takes the event of its row)."""
    return kind, change


CHANGES: dict[type, Change] = dict(
    [
        _on(ToolCallValidated, _checked),
        _on(ApprovalRequested, _checked),
        _on(ApprovalGranted, _granted),
        _on(ApprovalDenied, _denied_call),
        _on(ToolCallRejected, _rejected),
        _on(ToolCallWaiting, _waiting),
        _on(ToolCallBackedOff, _backed_off),
        _on(ToolCallScheduled, _scheduled),
        _on(ToolCallLeaseExpired, _lease_expired),
        _on(ToolCallStarted, _started),
        _on(ToolCallSucceeded, _succeeded),
        _on(ToolCallFailed, _failed),
        _on(ToolCallOutcomeUnknown, _outcome_unknown),
        _on(ToolCallConfirmedNotDone, _confirmed_not_done),
        _on(ToolCallCancelled, _cancelled),
        _on(ToolCallForceTerminated, _force_terminated),
    ]
)
"""What each call event changes in its call besides the status (which the call table
gives): one dict lookup per call event. Every class of `CallEvent` has a row
(tests/unit/test_exhaustive.py)."""
