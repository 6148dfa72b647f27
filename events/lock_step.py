"""Decisions about a call's locks: which calls of a turn ask for locks (in the
order the model proposed them, so conflicting calls run in that order), what
to record when a request is granted, waits or loses its lease, and which
requests a run no longer holds once a batch of its events is appended (a
finished call's, and every waiting or granted one of a run that ended).

A request id names one ask of one attempt of one call; it is made here and
nowhere else. The lock table keeps the run and call ids next to it, so nobody
parses an id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agentledger.events.limits import slot_limits
from agentledger.events.locks import Grant, Mode, resources
from agentledger.events.read_retry import retried
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import (
    Event,
    ToolCallBackedOff,
    ToolCallLeaseExpired,
    ToolCallScheduled,
    ToolCallWaiting,
)

C = CallStatus
R = RunStatus
_ALWAYS_HELD = frozenset({C.STARTED, C.OUTCOME_UNKNOWN})  # it may be running: the lease decides
_HELD_WHILE_GOING_ON = frozenset({C.WAITING, C.SCHEDULED})
_RECORDS_EXPIRY = frozenset({R.RUNNING_TOOLS, R.AWAITING_HUMAN, R.CANCELLING})


@dataclass(frozen=True, slots=True)
class LockAsk:
    run_id: str
    call_id: str
    request_id: str
    keys: dict[str, Mode]
    limits: dict[str, int] = field(default_factory=dict)  # slot key -> its max
    tenant: str = ""  # the run's principal's: waiters are served round-robin by tenant


def needs_locks(call: Call) -> bool:
    """Resources to lock, or concurrency keys to hold a slot of."""
    return bool(call.reads or call.writes or call.limits)


def call_keys(c: Call) -> dict[str, Mode]:
    """What a call asks the lock table for: its resources and its slot keys."""
    keys = resources(c.reads, c.writes)
    keys.update(dict.fromkeys(slot_limits(c.limits), Mode.SLOT))
    return keys


def request_id(s: RunState, c: Call) -> str:
    """The id of the call's next ask: its next attempt, and how many leases it lost."""
    return f"{s.run_id}/{c.call_id}/{c.attempts + 1}.{c.expiries}"


def lock_asks(s: RunState) -> list[LockAsk]:
    """Calls of the current turn that need locks and have not asked yet, in proposal order."""
    if s.status is not R.RUNNING_TOOLS or s.current_turn is None:
        return []
    return [
        _ask(s, c, request_id(s, c)) for c in s.current_turn.calls if needs_locks(c) and _may_ask(c)
    ]


MAX_BACKOFF_S = 300.0  # the longest a service's answer may close a shared key for
SlotLooks = Mapping[str, tuple[int, float | None]]  # slot key -> (holders, closed until)


def record_locks(
    s: RunState, asked: Sequence[LockAsk], grants: Mapping[str, Grant], slots: SlotLooks
) -> list[Event]:
    """What the lock table said to `asked`: scheduled (granted) or waiting, per call
    (with its slot keys' holders and back-off, as `slots` says); a call that was
    waiting already and now waits for a back-off it has not recorded: backed off."""
    out: list[Event] = []
    for ask in asked:
        grant = grants.get(ask.request_id)
        if grant is None and (backed := _backed_off(s, ask, slots)) is not None:
            out.append(backed)
            continue
        held = {k: slots[k][0] for k in ask.limits if k in slots}
        out += record_lock(
            s,
            ask.call_id,
            request=ask.request_id,
            tokens=grant.tokens if grant else None,
            lease_until=grant.lease_until if grant else 0.0,
            waiting_for=() if grant else tuple(ask.keys),
            holders=held,
            closed_until=_closed(ask, slots),
        )
    return out


def _closed(ask: LockAsk, slots: SlotLooks) -> float | None:
    ends = [until for k in ask.limits if k in slots and (until := slots[k][1]) is not None]
    return max(ends, default=None)


def _backed_off(s: RunState, ask: LockAsk, slots: SlotLooks) -> ToolCallBackedOff | None:
    call = s.call(ask.call_id)
    if s.status is not R.RUNNING_TOOLS or call is None or call.status is not C.WAITING:
        return None
    until = _closed(ask, slots)
    if call.lock_request != ask.request_id or until is None:
        return None
    if call.backed_off_until is not None and call.backed_off_until >= until:
        return None  # recorded already
    keys = tuple(k for k in ask.limits if (slots.get(k) or (0, None))[1] is not None)
    return ToolCallBackedOff(call_id=ask.call_id, request_id=ask.request_id, keys=keys, until=until)


def backoffs(before: RunState | None, after: RunState) -> dict[str, float]:
    """The slot keys to close, for every run, and for how long: those of each call
    that has just failed `rate_limited` with a `retry_after_s` (at most MAX_BACKOFF_S:
    a service cannot close a shared key for good)."""
    turn = after.current_turn
    out: dict[str, float] = {}
    for c in turn.calls if turn is not None else ():
        error = c.error
        if c.status is not C.FAILED or not c.limits or error is None:
            continue
        if error.code != "rate_limited" or not error.retry_after_s or error.retry_after_s <= 0:
            continue
        was = before.call(c.call_id) if before is not None else None
        if was is not None and was.status is C.FAILED:
            continue  # closed when it failed
        for key in slot_limits(c.limits):
            out[key] = max(out.get(key, 0.0), min(error.retry_after_s, MAX_BACKOFF_S))
    return out


def record_lock(
    s: RunState,
    call_id: str,
    *,
    request: str,
    tokens: Mapping[str, int] | None,
    lease_until: float = 0.0,
    waiting_for: tuple[str, ...] = (),
    holders: Mapping[str, int] | None = None,
    closed_until: float | None = None,
) -> list[Event]:
    """Scheduled when `tokens` is given, else waiting; [] when it no longer applies."""
    call = s.call(call_id)
    if s.status is not R.RUNNING_TOOLS or call is None or request != request_id(s, call):
        return []
    if tokens is not None and call.status in (C.VALIDATED, C.WAITING, C.OUTCOME_UNKNOWN):
        return [
            ToolCallScheduled(
                call_id=call_id, request_id=request, tokens=dict(tokens), lease_until=lease_until
            )
        ]
    if tokens is None and _may_ask(call):
        return [
            ToolCallWaiting(
                call_id=call_id,
                request_id=request,
                waiting_for=waiting_for,
                holders=dict(holders or {}),
                closed_until=closed_until,
            )
        ]
    return []


def record_lease_expired(s: RunState, call_id: str, *, request: str) -> list[Event]:
    """A holder that stopped renewing lost its locks. On a run that ended, or a call
    that moved on, there is nothing to record: the lock has passed on anyway."""
    call = s.call(call_id)
    if s.status not in _RECORDS_EXPIRY:
        return []
    if call is None or call.lock_request != request or call.status not in (C.SCHEDULED, C.STARTED):
        return []
    return [ToolCallLeaseExpired(call_id=call_id, request_id=request)]


def waiting_request(s: RunState, call_id: str) -> LockAsk | None:
    """The call's queued ask, to ask again (a grant may have come while nobody looked)."""
    call = s.call(call_id)
    if s.status is not R.RUNNING_TOOLS or call is None or call.status is not C.WAITING:
        return None
    assert call.lock_request is not None
    return _ask(s, call, call.lock_request)


def held_requests(s: RunState) -> frozenset[str]:
    """The lock requests the run still holds or waits on. A call that may be running
    keeps its locks until its outcome (or its lease) ends it; a run that ended or is
    cancelling holds nothing else."""
    turn = s.current_turn
    if turn is None:
        return frozenset()
    going_on = not s.status.terminal and s.status is not R.CANCELLING
    return frozenset(
        c.lock_request
        for c in turn.calls
        if c.lock_request is not None
        and (c.status in _ALWAYS_HELD or (going_on and c.status in _HELD_WHILE_GOING_ON))
    )


def released_asks(before: RunState | None, after: RunState) -> list[LockAsk]:
    """The requests to release once `after` is the log's state: those `before` held
    that `after` does not, and, for a run that stops, the next ask of every call
    that has not recorded one (a worker may have queued it and died before saying
    so; releasing an id the table does not know changes nothing). Each with its
    keys: a partitioned table releases it only where it is."""
    gone = set(held_requests(before) if before else ()) - held_requests(after)
    stopping = after.status.terminal or after.status is R.CANCELLING
    began_stopping = stopping and (
        before is None or not (before.status.terminal or before.status is R.CANCELLING)
    )
    if not gone and not began_stopping:
        return []  # the usual step: nothing held was let go, and the run goes on
    turn = after.current_turn
    calls = turn.calls if turn else ()
    out = {
        c.lock_request: _ask(after, c, c.lock_request)
        for c in calls
        if c.lock_request is not None and c.lock_request in gone
    }
    if before is not None and before.current_turn is not None:  # a turn that ended with it
        out |= {
            c.lock_request: _ask(before, c, c.lock_request)
            for c in before.current_turn.calls
            if c.lock_request is not None and c.lock_request in gone and c.lock_request not in out
        }
    if began_stopping:
        out |= {
            (rid := request_id(after, c)): _ask(after, c, rid)
            for c in calls
            if c.lock_request is None and not c.status.finished and c.status not in _ALWAYS_HELD
        }
    return [out[rid] for rid in sorted(out)]


def held_ask(s: RunState, call_id: str) -> LockAsk | None:
    """The request a running call holds, with its keys (to renew its lease)."""
    call = s.call(call_id)
    if call is None or call.lock_request is None:
        return None
    return _ask(s, call, call.lock_request)


def _ask(s: RunState, c: Call, request: str) -> LockAsk:
    tenant = s.spec.principal.tenant
    return LockAsk(s.run_id, c.call_id, request, call_keys(c), slot_limits(c.limits), tenant)


def _may_ask(c: Call) -> bool:
    return c.status is C.VALIDATED or retried(c)
