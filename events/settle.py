"""Follow-ups that any batch of events can make due, appended in the same batch:
a cancelled run whose last running call has stopped is cancelled; a run whose
last steps repeat the same failure K times goes to a human; a run that waits for
a human only because a write's outcome was unknown goes on once that outcome is
known (its result came late, or its lookup found it)."""

from __future__ import annotations

from events.repeat import failing_streak
from events.state import RunState
from events.status import CallStatus, RunStatus
from events.types import Event, RunCancelled, RunEscalated, RunResumed


def settle(s: RunState) -> list[Event]:
    if s.status is RunStatus.CANCELLING and not s.in_flight:
        return [_cancelled(s)]
    if s.status is RunStatus.AWAITING_HUMAN and s.escalated_for == "outcome_unknown":
        calls = s.current_turn.calls if s.current_turn else ()
        if not any(c.status is CallStatus.OUTCOME_UNKNOWN for c in calls):
            return [RunResumed(by="agentledger", note="the unknown outcome became known")]
    if s.status is RunStatus.REQUESTING_MODEL:
        streak, fp = failing_streak(s)
        if fp is not None and streak >= s.spec.budgets.repeat_limit:
            detail = f"{s.turns_used} turns, {streak} identical {fp.describe()}"
            return [RunEscalated(reason="repeated_failure", detail=detail)]
    return []


def _cancelled(s: RunState) -> RunCancelled:
    effects = [
        f"{c.name}({c.call_id}) {c.status}"
        for t in s.turns
        for c in t.calls
        if not c.read_only
        and c.status
        in (
            CallStatus.SUCCEEDED,
            CallStatus.OUTCOME_UNKNOWN,
            CallStatus.FORCE_TERMINATED,
            CallStatus.CANCELLED,
        )
    ]
    stopped = [
        f"{c.call_id} {c.status}"
        for c in (s.current_turn.calls if s.current_turn else ())
        if c.status in (CallStatus.CANCELLED, CallStatus.FORCE_TERMINATED)
    ]
    detail = f"cancelled by {s.cancel_by}; " + (
        f"stopped: {', '.join(stopped)}; " if stopped else ""
    )
    detail += f"side effects already done (not rolled back): {', '.join(effects) or 'none'}"
    return RunCancelled(
        requested_at=s.cancel_requested_at or 0.0,
        by=s.cancel_by,
        side_effects=tuple(effects),
        detail=detail,
    )
