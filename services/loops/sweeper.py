"""The sweeper, the backstop: for the shards this process owns, it re-drives every
live run that has made no progress within the lease, from the event log alone,
whatever the broker lost; a run it looked at is looked at again after another
lease, or at the first pass after its next deadline (`events.ticks.next_tick`:
a dead worker's claim running out) when that comes sooner. First it lets time
decide (`events.ticks`): claims whose worker went silent (a read-only one at
once when its worker is proven dead, `App.dead_workers`), approvals nobody
answered, the wall-clock budget; then it sends everything due (asking again for the locks a waiting call is
queued for). It also ends the leases of lock holders that stopped renewing and
tells whoever the locks pass to. One run it cannot fold never stops the pass."""

from __future__ import annotations

import logging
import threading
from functools import partial

from events.dispatch import due_commands, new_commands
from events.errors import CoreError
from events.lock_step import record_lease_expired
from events.state import RunState
from events.ticks import next_tick, on_tick
from events.types import Event
from schemas.errors import SchemaError
from services.adapters.broker.membership import Membership
from services.adapters.locks.port import Holder
from services.errors import UnknownRun
from services.handlers.app import App

SOURCE = "sweeper"
log = logging.getLogger(__name__)


def sweep_once(app: App, shards: list[int]) -> int:
    """Look at the idle live runs of `shards` once; return how many were re-driven."""
    now = app.clock.now()
    idle = app.store.idle_live_runs(idle_since=now - app.settings.lease_s, shards=shards)
    expire_leases(app)  # after choosing: recording an expiry is not progress of the run
    redriven = 0
    for run_id in idle:
        look_at = now  # look again after a lease, not every pass
        try:
            moved, tick = _redrive(app, run_id, now)
            redriven += moved
            if tick is not None and tick > now:  # or as soon as a deadline passes, if sooner
                look_at = min(now, tick - app.settings.lease_s)
        except (CoreError, SchemaError, UnknownRun) as exc:
            log.error("run %r cannot be folded, not swept: %s", run_id, exc)
        app.store.touch(run_id, at=look_at)
    return redriven


def _redrive(app: App, run_id: str, now: float) -> tuple[bool, float | None]:
    """Whether anything was sent, and when time alone may move the run next."""
    before = app.runs.load(run_id)
    if before is None:
        raise UnknownRun(run_id)
    dead = app.dead_workers(before)  # a dead worker's reads are settled at once
    step = app.runs.step(
        run_id, lambda s: on_tick(s, now=now, dead=dead), source=SOURCE, held=before
    )
    sent = set(new_commands(before, step.state, now=now)) if step.appended else set()
    again = [c for c in due_commands(step.state, now=now, redrive=True) if c not in sent]
    app.send(app.outbox.messages(step.state, again))
    return bool(again or sent), next_tick(step.state)


def expire_leases(app: App) -> int:
    """Holders that stopped renewing lose their locks; each expiry goes in its run's
    log (nothing is recorded for a run that ended) and the next holder is told."""
    reply = app.locks.expire()
    for holder in reply.expired:
        try:
            app.runs.step(
                holder.run_id,
                partial(_lease_expired, holder=holder),
                source=SOURCE,
            )
        except (CoreError, SchemaError, UnknownRun) as exc:
            log.error("lease expiry of %r not recorded: %s", holder.request_id, exc)
    app.send(reply.notices())
    return len(reply.expired)


def run_sweeper(
    app: App, membership: Membership, shards: range, stop: threading.Event
) -> None:
    while not stop.wait(app.settings.sweep_interval_s):
        membership.beat()
        sweep_once(app, membership.owned(shards))


def _lease_expired(s: RunState, *, holder: Holder) -> list[Event]:
    return record_lease_expired(s, holder.call_id, request=holder.request_id)
