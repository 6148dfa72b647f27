"""Decisions on what people and other systems say to a live run: cancel,
approve, deny, reply, resume, abort. A control that does not fit the run's
state is refused with `ControlRefused` naming why; nothing is appended.

Each control names exactly what it answers: an approval its call (which must be
awaiting approval now), a reply, resume or abort the escalation (the seq of its
`RunEscalated` event), which must be the run's current one — an answer to an
earlier escalation never answers a later one. `publisher` is the inbox
publisher that signed the control (None: it did not come through the inbox);
the event records it beside the free-text `by`."""

from __future__ import annotations

from agentledger.events.errors import ControlRefused
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.transitions import RUN_TRANSITIONS
from agentledger.events.types import (
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


def cancel(
    s: RunState, *, by: str, source: str, reason: str = "", publisher: str | None = None
) -> list[Event]:
    _allowed(s, RunCancelRequested, "cancel")
    return [RunCancelRequested(by=by, source=source, reason=reason, publisher=publisher)]


def approve(
    s: RunState, call_id: str, *, by: str, note: str = "", publisher: str | None = None
) -> list[Event]:
    _awaiting_approval(s, call_id)
    return [ApprovalGranted(call_id=call_id, by=by, note=note, publisher=publisher)]


def deny(
    s: RunState, call_id: str, *, by: str, note: str = "", publisher: str | None = None
) -> list[Event]:
    _awaiting_approval(s, call_id)
    return [ApprovalDenied(call_id=call_id, by=by, note=note, publisher=publisher)]


def reply(
    s: RunState, *, by: str, text: str, escalation: int, publisher: str | None = None
) -> list[Event]:
    _answers_current(s, "reply", escalation)
    if s.escalated_for == "flow_gate":
        return _gate_reply(s, by=by, text=text, publisher=publisher)
    if s.current_turn is None:
        raise ControlRefused(s.run_id, "the model has not spoken yet: resume or abort instead")
    if not text.strip():
        raise ControlRefused(s.run_id, "a reply needs some text")
    return [*_unknowns_told(s, by), HumanReplied(by=by, text=text, publisher=publisher)]


def _gate_reply(s: RunState, *, by: str, text: str, publisher: str | None) -> list[Event]:
    """A reply at a flow's gate is its result, routed by the gate's `on: {replied: …}`:
    refused at a gate that routes none (what the reply means is the flow's to say)."""
    stage = s.flow.stage if s.flow is not None else ""
    gate = next((st for st in s.spec.flow or () if st.id == stage), None)
    if gate is None or "replied" not in gate.on:
        raise ControlRefused(
            s.run_id, f"the flow's gate {stage!r} takes no reply (its on: routes no 'replied'): "
            "approve or deny it",
        )  # fmt: skip
    if not text.strip():
        raise ControlRefused(s.run_id, "a reply needs some text")
    return [HumanReplied(by=by, text=text, publisher=publisher)]


def resume(
    s: RunState, *, by: str, escalation: int, note: str = "", publisher: str | None = None
) -> list[Event]:
    _answers_current(s, "resume", escalation)
    return [*_unknowns_told(s, by), RunResumed(by=by, note=note, publisher=publisher)]


def abort(
    s: RunState, *, by: str, escalation: int, note: str = "", publisher: str | None = None
) -> list[Event]:
    _answers_current(s, "abort", escalation)
    return [RunAborted(by=by, note=note, publisher=publisher)]


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


def _allowed(s: RunState, event: type[Event], what: str) -> None:
    if not any(src is s.status and e is event for src, e, _ in RUN_TRANSITIONS):
        raise ControlRefused(s.run_id, f"cannot {what} a run that is {s.status}")


def _answers_current(s: RunState, what: str, escalation: int) -> None:
    """The run waits for a human, and the answer names the escalation it waits on."""
    if s.status is not R.AWAITING_HUMAN:
        raise ControlRefused(s.run_id, f"cannot {what}: the run is {s.status}, not awaiting_human")
    if escalation != s.escalation:
        raise ControlRefused(
            s.run_id,
            f"cannot {what}: it answers the escalation at seq {escalation}, but the run waits "
            f"on the one at seq {s.escalation}",
        )


def _awaiting_approval(s: RunState, call_id: str) -> None:
    if s.status not in (R.VALIDATING, R.AWAITING_APPROVAL):
        raise ControlRefused(s.run_id, f"cannot answer for call {call_id!r}: the run is {s.status}")
    call = s.call(call_id)
    if call is None:
        raise ControlRefused(s.run_id, f"no call {call_id!r} in the current turn")
    if call.status is not CallStatus.AWAITING_APPROVAL:
        raise ControlRefused(s.run_id, f"call {call_id!r} is {call.status}, not awaiting_approval")
