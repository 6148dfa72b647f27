"""Decisions about one tool call: validate it, claim it, record its outcome, and
expire claims whose worker went silent. Pure: the registry lookup, argument
validation and the tool itself run in services/ and hand their findings in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.state import Call, RunState
from events.status import CallStatus, RunStatus
from events.types import (
    Event,
    FieldError,
    RunEscalated,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolError,
)
from schemas.spec import ToolSpec

MAX_READ_ATTEMPTS = 3
CLAIM_GRACE_S = 5.0


def validate_call(
    s: RunState,
    call_id: str,
    *,
    tool: ToolSpec | None,
    known_tools: Sequence[str],
    field_errors: Sequence[FieldError],
    reads: Sequence[str] = (),
    writes: Sequence[str] = (),
) -> list[Event]:
    call = s.call(call_id)
    if (
        s.status is not RunStatus.VALIDATING
        or call is None
        or call.status is not CallStatus.PROPOSED
    ):
        return []
    if tool is None:
        known = ", ".join(sorted(known_tools)) or "none"
        return [_reject(call_id, "unknown_tool", f"no tool named {call.name!r}; tools: {known}")]
    if field_errors:
        what = "; ".join(f"{f.loc}: {f.msg}" for f in field_errors)
        return [_reject(call_id, "invalid_arguments", what, fields=tuple(field_errors))]
    if tool.scope is not None and tool.scope not in s.spec.principal.scopes:
        who = s.spec.principal.id
        return [_reject(call_id, "permission_denied", f"{who!r} lacks scope {tool.scope!r}")]
    return [
        ToolCallValidated(
            call_id=call_id,
            read_only=tool.read_only,
            reads=tuple(reads),
            writes=tuple(writes),
            timeout_s=tool.timeout_s,
        )
    ]


def claim_call(s: RunState, call_id: str, *, worker: str, now: float) -> list[Event]:
    call = s.call(call_id)
    if s.status is not RunStatus.RUNNING_TOOLS or call is None or not claimable(call):
        return []
    deadline = now + call.timeout_s + CLAIM_GRACE_S
    return [
        ToolCallStarted(
            call_id=call_id, attempt=call.attempts + 1, worker=worker, deadline_at=deadline
        )
    ]


@dataclass(frozen=True, slots=True)
class Succeeded:
    output: Any


@dataclass(frozen=True, slots=True)
class Errored:
    error: ToolError


@dataclass(frozen=True, slots=True)
class TimedOut:
    after_s: float


Outcome = Succeeded | Errored | TimedOut


def record_outcome(
    s: RunState,
    call_id: str,
    *,
    attempt: int,
    outcome: Outcome,
    started_at: float,
    finished_at: float,
) -> list[Event]:
    call = s.call(call_id)
    if call is None or call.status is not CallStatus.STARTED or call.attempts != attempt:
        return []  # recorded already, or another attempt owns the call now
    match outcome:
        case Succeeded(output):
            return [
                ToolCallSucceeded(
                    call_id=call_id, output=output, started_at=started_at, finished_at=finished_at
                )
            ]
        case Errored(error):
            return [
                ToolCallFailed(
                    call_id=call_id, error=error, started_at=started_at, finished_at=finished_at
                )
            ]
        case TimedOut(after_s):
            if call.read_only:
                error = ToolError(
                    code="timeout", message=f"no result within {after_s:g}s", retryable=True
                )
                return [
                    ToolCallFailed(
                        call_id=call_id, error=error, started_at=started_at, finished_at=finished_at
                    )
                ]
            return _unknown(
                call,
                f"the write timed out after {after_s:g}s; it may have happened",
                at=finished_at,
            )


def expire_claims(s: RunState, *, now: float) -> list[Event]:
    """Calls claimed by a worker that went silent past the claim's deadline."""
    if s.status is not RunStatus.RUNNING_TOOLS or s.current_turn is None:
        return []
    events: list[Event] = []
    for call in s.current_turn.calls:
        if (
            call.status is CallStatus.STARTED
            and call.claim_deadline is not None
            and now >= call.claim_deadline
        ):
            reason = f"no result by the claim's deadline (attempt {call.attempts}); the worker may have died"
            events += _unknown(call, reason, at=now)
            if any(isinstance(e, RunEscalated) for e in events):
                break
    return events


def _unknown(call: Call, reason: str, *, at: float) -> list[Event]:
    unknown = ToolCallOutcomeUnknown(call_id=call.call_id, reason=reason)
    if not call.read_only:
        detail = f"outcome of write {call.name}({call.call_id}) unknown: {reason}"
        return [unknown, RunEscalated(reason="outcome_unknown", detail=detail)]
    if call.attempts >= MAX_READ_ATTEMPTS:
        error = ToolError(
            code="timeout", message=f"{call.attempts} attempts gave no result", retryable=False
        )
        return [unknown, ToolCallFailed(call_id=call.call_id, error=error, finished_at=at)]
    return [unknown]


def claimable(call: Call) -> bool:
    """A validated call, or a read-only call whose outcome is unknown with tries left."""
    if call.status is CallStatus.VALIDATED:
        return True
    return (
        call.status is CallStatus.OUTCOME_UNKNOWN
        and call.read_only
        and call.attempts < MAX_READ_ATTEMPTS
    )


def _reject(
    call_id: str, code: Any, message: str, fields: tuple[FieldError, ...] = ()
) -> ToolCallRejected:
    return ToolCallRejected(
        call_id=call_id, error=ToolError(code=code, message=message, retryable=False, fields=fields)
    )
