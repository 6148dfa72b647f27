"""Decisions on what people and other systems say to a live run: cancel,
approve, deny, reply, resume, abort. A control that does not fit the run's
state is refused with `ControlRefused` naming why; nothing is appended."""

from __future__ import annotations

from events.errors import ControlRefused
from events.state import RunState
from events.status import CallStatus, RunStatus
from events.transitions import RUN_TRANSITIONS
from events.types import (
    ApprovalDenied,
    ApprovalGranted,
    Event,
    HumanReplied,
    RunAborted,
    RunCancelRequested,
    RunResumed,
    ToolCallFailed,
    ToolError,
)

R = RunStatus


def cancel(s: RunState, *, by: str, source: str, reason: str = "") -> list[Event]:
    _allowed(s, "RunCancelRequested", "cancel")
    return [RunCancelRequested(by=by, source=source, reason=reason)]


def approve(s: RunState, call_id: str, *, by: str, note: str = "") -> list[Event]:
    _awaiting_approval(s, call_id)
    return [ApprovalGranted(call_id=call_id, by=by, note=note)]


def deny(s: RunState, call_id: str, *, by: str, note: str = "") -> list[Event]:
    _awaiting_approval(s, call_id)
    return [ApprovalDenied(call_id=call_id, by=by, note=note)]


def reply(s: RunState, *, by: str, text: str) -> list[Event]:
    _awaiting_human(s, "reply")
    if s.current_turn is None:
        raise ControlRefused(s.run_id, "the model has not spoken yet: resume or abort instead")
    if not text.strip():
        raise ControlRefused(s.run_id, "a reply needs some text")
    return [*_unknowns_told(s, by), HumanReplied(by=by, text=text)]


def resume(s: RunState, *, by: str, note: str = "") -> list[Event]:
    _awaiting_human(s, "resume")
    return [*_unknowns_told(s, by), RunResumed(by=by, note=note)]


def abort(s: RunState, *, by: str, note: str = "") -> list[Event]:
    _awaiting_human(s, "abort")
    return [RunAborted(by=by, note=note)]


def _unknowns_told(s: RunState, by: str) -> list[Event]:
    """Calls whose outcome is unknown go back to the model as exactly that."""
    calls = s.current_turn.calls if s.current_turn else ()
    message = f"the outcome is unknown: it may have happened; {by} let the run go on"
    error = ToolError(code="outcome_unknown", message=message, retryable=False)
    return [
        ToolCallFailed(call_id=c.call_id, error=error, finished_at=s.updated_at)
        for c in calls
        if c.status is CallStatus.OUTCOME_UNKNOWN
    ]


def _allowed(s: RunState, event_type: str, what: str) -> None:
    if not any(src is s.status and e == event_type for src, e, _ in RUN_TRANSITIONS):
        raise ControlRefused(s.run_id, f"cannot {what} a run that is {s.status}")


def _awaiting_human(s: RunState, what: str) -> None:
    if s.status is not R.AWAITING_HUMAN:
        raise ControlRefused(s.run_id, f"cannot {what}: the run is {s.status}, not awaiting_human")


def _awaiting_approval(s: RunState, call_id: str) -> None:
    if s.status not in (R.VALIDATING, R.AWAITING_APPROVAL):
        raise ControlRefused(s.run_id, f"cannot answer for call {call_id!r}: the run is {s.status}")
    call = s.call(call_id)
    if call is None:
        raise ControlRefused(s.run_id, f"no call {call_id!r} in the current turn")
    if call.status is not CallStatus.AWAITING_APPROVAL:
        raise ControlRefused(s.run_id, f"call {call_id!r} is {call.status}, not awaiting_approval")
