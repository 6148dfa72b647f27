"""Decisions of the lock pool: which calls of a turn ask for locks (in the
order the model proposed them, so conflicting calls run in that order), and
what to record when a request is granted, waits, or loses its lease."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from events.locks import Mode, resources
from events.state import Call, RunState
from events.status import CallStatus, RunStatus
from events.tool_step import MAX_READ_ATTEMPTS
from events.types import Event, ToolCallLeaseExpired, ToolCallScheduled, ToolCallWaiting

C = CallStatus


@dataclass(frozen=True, slots=True)
class LockAsk:
    call_id: str
    request_id: str
    keys: dict[str, Mode]


def needs_locks(call: Call) -> bool:
    return bool(call.reads or call.writes)


def lock_asks(s: RunState) -> list[LockAsk]:
    """Calls of the current turn that need locks and have not asked yet, in proposal order."""
    if s.status is not RunStatus.RUNNING_TOOLS or s.current_turn is None:
        return []
    return [
        LockAsk(c.call_id, request_id(s, c), resources(c.reads, c.writes))
        for c in s.current_turn.calls
        if needs_locks(c) and _may_ask(c)
    ]


def request_id(s: RunState, c: Call) -> str:
    return f"{s.run_id}/{c.call_id}/{c.attempts + 1}"


def record_lock(
    s: RunState,
    call_id: str,
    *,
    request: str,
    tokens: Mapping[str, int] | None,
    lease_until: float = 0.0,
    waiting_for: tuple[str, ...] = (),
) -> list[Event]:
    """Scheduled when `tokens` is given, else waiting; [] when it no longer applies."""
    call = s.call(call_id)
    if s.status is not RunStatus.RUNNING_TOOLS or call is None or request != request_id(s, call):
        return []
    if tokens is not None and call.status in (C.VALIDATED, C.WAITING, C.OUTCOME_UNKNOWN):
        return [
            ToolCallScheduled(
                call_id=call_id, request_id=request, tokens=dict(tokens), lease_until=lease_until
            )
        ]
    if tokens is None and _may_ask(call):
        return [ToolCallWaiting(call_id=call_id, request_id=request, waiting_for=waiting_for)]
    return []


def record_lease_expired(s: RunState, call_id: str, *, request: str) -> list[Event]:
    call = s.call(call_id)
    if call is None or call.lock_request != request or call.status not in (C.SCHEDULED, C.STARTED):
        return []
    return [ToolCallLeaseExpired(call_id=call_id, request_id=request)]


def _may_ask(c: Call) -> bool:
    if c.status is C.VALIDATED:
        return True
    return c.status is C.OUTCOME_UNKNOWN and c.read_only and c.attempts < MAX_READ_ATTEMPTS


def uses_grant(s: RunState, call_id: str, request: str) -> bool:
    """The call holds this grant (scheduled or running): keep the lock."""
    call = s.call(call_id)
    return (
        call is not None
        and call.lock_request == request
        and call.status in (C.SCHEDULED, C.STARTED)
    )
