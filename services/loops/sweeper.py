"""The sweeper, the backstop: for the shards this process owns, it re-drives every
live run that has made no progress within the lease, from the event log alone,
whatever the broker lost. A run it looked at is looked at again when
`agentledger.events.looks.next_look` says: after another lease, or at the first
pass after its next deadline (a dead worker's claim running out) when that comes
sooner; a parked run (waiting for an approval, nothing due to a worker, nothing
in flight) only at its deadline (the approval's expiry, the wall clock), so a
thousand parked runs cost nothing between their deadlines. Its look is written
only while the run is still where it was folded: an append since (an answer, a
cancel) scored it afresh and wins.

First it lets time decide (`agentledger.events.ticks`): claims whose worker went
silent (a read-only one at once when its worker is proven dead,
`App.dead_workers`), approvals nobody answered, the wall-clock budget; the time
it could not reach Redis does not count against a claim (`Reach`); then it sends
everything due (asking again for the locks a waiting call is queued for) that is
not still waiting in its queue (`App.resend`: the lag an autoscaler reads counts
steps, not re-drives). It also ends the leases of lock holders that stopped
renewing and tells whoever the locks pass to. One run it cannot fold never stops
the pass. Between passes it archives the finished runs past their retention age
(`agentledger.services.loops.retention`)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from functools import partial

from agentledger.events.claims import Window
from agentledger.events.dispatch import due_commands, new_commands
from agentledger.events.errors import CoreError
from agentledger.events.lock_step import record_lease_expired
from agentledger.events.looks import next_look
from agentledger.events.state import RunState
from agentledger.events.ticks import on_tick
from agentledger.events.types import Event
from agentledger.schemas.errors import SchemaError
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.locks.port import Holder
from agentledger.services.errors import UnknownRun
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.handlers.outage import OUTAGE_ERRORS
from agentledger.services.keys import keys_for
from agentledger.services.loops.retention import RetentionDuty

SOURCE = "sweeper"
LINES_EVERY_S = 10.0  # how often the tenants' lines on capped queues are checked against the logs
log = logging.getLogger(__name__)


def sweep_once(app: App, shards: list[int], *, unreachable: Sequence[Window] = ()) -> int:
    """Look at the idle live runs of `shards` once; return how many were re-driven.
    `unreachable`: the windows in which this sweeper could not reach Redis (that
    time does not count against a claim: `agentledger.events.ticks`)."""
    now = app.clock.now()
    lease = app.settings.lease_s
    idle = app.store.idle_live_runs(idle_since=now - lease, shards=shards)
    expire_leases(app)  # after choosing: recording an expiry is not progress of the run
    redriven = 0
    for run_id in idle:
        try:
            moved, after = _redrive(app, run_id, now, unreachable)
        except (CoreError, SchemaError, UnknownRun) as exc:
            log.error("run %r cannot be folded, not swept: %s", run_id, exc)
            app.store.touch(run_id, at=now)  # looked at again after a lease
            continue
        redriven += moved
        look = next_look(after, at=now, lease_s=lease, unreachable=unreachable)
        if look is not None:  # the index says idle a lease after its score: due at `look`
            app.store.touch(run_id, at=look - lease, seq=after.seq)
    return redriven


def _redrive(
    app: App, run_id: str, now: float, unreachable: Sequence[Window]
) -> tuple[bool, RunState]:
    """Whether anything was sent, and the run's state after the look."""
    before = app.runs.load(run_id)
    if before is None:
        raise UnknownRun(run_id)
    dead = app.dead_workers(before)  # a dead worker's reads are settled at once
    step = app.engine.take(
        run_id,
        Decided(SOURCE, lambda s: on_tick(s, now=now, dead=dead, unreachable=unreachable)),
        held=before,
    )
    sent = set(new_commands(before, step.state, now=now)) if step.appended else set()
    due = due_commands(step.state, now=now, redrive=True, unreachable=unreachable)
    again = [c for c in due if c not in sent]
    (app.resend or app.send)(app.outbox.messages(step.state, again))  # none twice in a queue
    return bool(again or sent), step.state


def reconcile_lines(app: App, owned: list[int]) -> int:
    """Put right the tenants' lines on capped queues whose first held run is in a
    shard of `owned` (`agentledger.services.handlers.lines`); how many runs were put right."""
    lines = app.runs.lines
    if lines is None:
        return 0
    keys, mine = keys_for(app.settings), set(owned)
    return lines.reconcile_held(
        app.runs.load, app.engine.release_held, mine=lambda run_id: keys.shard(run_id) in mine
    )


def expire_leases(app: App) -> int:
    """Holders that stopped renewing lose their locks; each expiry goes in its run's
    log (nothing is recorded for a run that ended) and the next holder is told."""
    reply = app.locks.expire()
    for holder in reply.expired:
        try:
            app.engine.take(holder.run_id, Decided(SOURCE, partial(_lease_expired, holder=holder)))
        except (CoreError, SchemaError, UnknownRun) as exc:
            log.error("lease expiry of %r not recorded: %s", holder.request_id, exc)
    app.send(reply.notices())
    return len(reply.expired)


class Reach:
    """What this sweeper saw of Redis: the windows in which it could not reach it,
    each from its last good pass to its first good one after (the most it can
    have been down), the last few kept."""

    def __init__(self, keep: int = 8) -> None:
        self._windows: deque[Window] = deque(maxlen=keep)
        self._last_ok: float | None = None
        self._down_from: float | None = None

    def windows(self, now: float) -> list[Window]:
        still = [(self._down_from, now)] if self._down_from is not None else []
        return [*self._windows, *still]

    def reached(self, at: float) -> None:
        if self._down_from is not None:
            self._windows.append((self._down_from, at))
            self._down_from = None
        self._last_ok = at

    def lost(self, at: float) -> bool:
        """Record a pass that could not reach Redis; True at the first of an outage."""
        if self._down_from is not None:
            return False
        self._down_from = self._last_ok if self._last_ok is not None else at
        return True


def run_sweeper(
    app: App,
    membership: Membership,
    shards: range,
    stop: threading.Event,
    retention: RetentionDuty | None = None,
) -> None:
    """`retention`, when given: finished runs past their age go to the archive
    (`agentledger.services.loops.retention`), between passes."""
    reach = Reach()
    lines_at = 0.0
    while not stop.wait(app.settings.sweep_interval_s):
        started = app.clock.now()
        try:
            membership.beat()
            owned = membership.owned(shards)
            sweep_once(app, owned, unreachable=reach.windows(started))
            if started >= lines_at:
                lines_at = started + LINES_EVERY_S
                reconcile_lines(app, owned)
            if retention is not None:
                retention.maybe_run(owned)
        except OUTAGE_ERRORS as exc:
            if reach.lost(started):
                log.warning("the sweeper lost Redis (%s); trying again every pass", exc)
            continue
        reach.reached(started)


def _lease_expired(s: RunState, *, holder: Holder) -> list[Event]:
    return record_lease_expired(s, holder.call_id, request=holder.request_id)
