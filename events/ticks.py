"""What the passing of time decides, for the sweeper: claims whose worker went
silent past their deadline, approval requests nobody answered, and the
wall-clock budget of a live or waiting run. A read-only call whose claiming
worker is known to be dead (`dead`: the shell's proof, `agentledger.services.adapters.
redis.worker_deaths`) is settled at once, as its deadline would settle it: no
read can still be running in a process that is gone, and an unknown read may
run again anyway. A write keeps its deadline (an effect it set going, a child
process or a request already sent, may still land).

Time the sweeper could not reach Redis (`unreachable`: the windows it saw, from
its last good call to its first one after) does not count against a claim: a
claim's expiry is `agentledger.events.claims`' rule, so a worker that rode out the outage
with its outcome in hand lands it before the claim is judged."""

from __future__ import annotations

from collections.abc import Sequence

from agentledger.events.budgets import wall_clock_exceeded
from agentledger.events.claims import Window, expired, lapses_at
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import unknown_outcome
from agentledger.events.types import ApprovalDenied, Event, RunEscalated


def on_tick(
    s: RunState,
    *,
    now: float,
    dead: frozenset[str] = frozenset(),
    unreachable: Sequence[Window] = (),
) -> list[Event]:
    """`dead`: workers proven dead (silent and their process gone), by name;
    `unreachable`: the windows in which the sweeper could not reach Redis."""
    if not s.status.watched:
        return []
    if s.status is not RunStatus.CANCELLING and (timed_out := wall_clock_exceeded(s, now=now)):
        return [timed_out]
    return _expired_approvals(s, now) + _expired_claims(s, now, dead, unreachable)


def next_tick(s: RunState, *, unreachable: Sequence[Window] = ()) -> float | None:
    """The earliest time at which the passing of time alone may move the run: a
    claim's deadline (model, acceptance, a tool call in flight), as `agentledger.events.claims`
    counts it past `unreachable`, or an approval's expiry. None when no such moment
    is pending (the wall-clock budget is left to the sweeper's regular looks)."""
    if not s.status.watched:
        return None
    runs = (s.model_claim_deadline, s.acceptance_claim_deadline)
    times = [lapses_at(d, unreachable=unreachable) for d in runs if d is not None]
    for c in s.current_turn.calls if s.current_turn else ():
        if c.status is CallStatus.STARTED and c.claim_deadline is not None:
            times.append(
                lapses_at(c.claim_deadline, claimed_at=c.started_at, unreachable=unreachable)
            )
        elif c.status is CallStatus.AWAITING_APPROVAL and c.approval_expires_at is not None:
            times.append(c.approval_expires_at)
    return min(times) if times else None


def _expired_approvals(s: RunState, now: float) -> list[Event]:
    if s.status is not RunStatus.AWAITING_APPROVAL or s.current_turn is None:
        return []
    return [
        ApprovalDenied(call_id=c.call_id, by="agentledger", note="no answer in time", expired=True)
        for c in s.current_turn.calls
        if c.status is CallStatus.AWAITING_APPROVAL
        and c.approval_expires_at is not None
        and now >= c.approval_expires_at
    ]


def dead_claimants(s: RunState) -> list[str]:
    """The workers whose death would settle a claim of the run early: those
    holding its read-only calls in flight (the shell asks only about these)."""
    return sorted({c.claimed_by for c in s.in_flight if c.read_only and c.claimed_by})


def _expired_claims(
    s: RunState, now: float, dead: frozenset[str], unreachable: Sequence[Window]
) -> list[Event]:
    events: list[Event] = []
    for call in s.in_flight:
        if expired(
            call.claim_deadline, now=now, claimed_at=call.started_at, unreachable=unreachable
        ):
            reason = f"no result by the claim's deadline (attempt {call.attempts}); the worker may have died"
        elif call.read_only and call.claimed_by in dead:
            reason = f"its worker {call.claimed_by} died holding it (attempt {call.attempts})"
        else:
            continue
        events += unknown_outcome(s, call, reason, at=now)
        if any(isinstance(e, RunEscalated) for e in events):
            break
    return events
