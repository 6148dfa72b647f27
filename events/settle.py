"""Decide, then settle: a step's batch is the events its decision returned, then
the follow-ups the state they lead to makes due, appended together. Follow-ups:
a cancelled run whose last running call has stopped is cancelled; a run whose
last steps repeat the same failure K times goes to a human; a run that waits for
a human only because a write's outcome was unknown goes on once that outcome is
known (its result came late, or its lookup found it).

`settle_batch` is the rule the step engine (`agentledger.services.handlers.runs`) applies to
every batch; the fold it is given is the writer's (envelopes as they will be
stored), so follow-ups are decided on the state the log will hold."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentledger.events.counted import counted
from agentledger.events.flow_step import child_live, route
from agentledger.events.repeat import failing_streak
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import Event, RunCancelled, RunEscalated, RunResumed

FoldOn = Callable[[RunState, Sequence[Event]], RunState]


def settle_batch(
    s: RunState, decided: Sequence[Event], fold_on: FoldOn
) -> tuple[list[Event], RunState]:
    """The batch for `decided` (made on `s`) and the state it leads to: the decided
    events folded, then the follow-ups that state makes due, folded too. An illegal
    event raises from `fold_on` before anything is written."""
    after = fold_on(s, decided)
    follow_ups = settle(after)
    if follow_ups:
        after = fold_on(after, follow_ups)
    return [*decided, *follow_ups], after


def settle(s: RunState) -> list[Event]:
    if s.flow is not None and (routed := route(s)):
        return routed
    if s.status is RunStatus.CANCELLING and not s.in_flight and not child_live(s):
        return [_cancelled(s)]
    if s.status is RunStatus.AWAITING_HUMAN and s.escalated_for == "outcome_unknown":
        calls = s.current_turn.calls if s.current_turn else ()
        if not any(c.status is CallStatus.OUTCOME_UNKNOWN for c in calls):
            return [RunResumed(by="agentledger", note="the unknown outcome became known")]
    if s.status is RunStatus.REQUESTING_MODEL:
        streak, fp = failing_streak(s)
        if fp is not None and streak >= s.spec.budgets.repeat_limit:
            detail = f"{counted(s.turns_used, 'turn')}, {streak} identical {fp.describe()}"
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
