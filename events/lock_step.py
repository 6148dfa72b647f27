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
from agentledger.events.types import Event, ToolCallLeaseExpired, ToolCallScheduled, ToolCallWaiting

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


def record_locks(s: RunState, asked: Sequence[LockAsk], grants: Mapping[str, Grant]) -> list[Event]:
    """What the lock table said to `asked`: scheduled (granted) or waiting, per call."""
    out: list[Event] = []
    for ask in asked:
        grant = grants.get(ask.request_id)
        out += record_lock(
            s,
            ask.call_id,
            request=ask.request_id,
            tokens=grant.tokens if grant else None,
            lease_until=grant.lease_until if grant else 0.0,
            waiting_for=() if grant else tuple(ask.keys),
        )
    return out


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
    if s.status is not R.RUNNING_TOOLS or call is None or request != request_id(s, call):
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
    return LockAsk(s.run_id, c.call_id, request, call_keys(c), slot_limits(c.limits))


def _may_ask(c: Call) -> bool:
    return c.status is C.VALIDATED or retried(c)
