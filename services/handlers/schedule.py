"""The lock pool: asks for the locks of a turn's calls (in proposal order) and
records grants and waits in the runs' logs. Grants can go to other runs too
(a release passes locks on across runs), so each grant is recorded in the log
of the run it belongs to; a grant that no longer applies is released at once."""

from __future__ import annotations

from collections.abc import Iterable

from events.lock_step import lock_asks, record_lease_expired, record_lock, uses_grant
from events.locks import Grant
from events.state import RunState
from services.errors import UnknownRun
from services.handlers.app import App
from services.handlers.steps import load, run_step

SOURCE = "locks"


def handle_schedule_calls(app: App, run_id: str) -> None:
    state = load(app.store, run_id)
    asks = lock_asks(state) if state else []
    if not asks:
        return
    reply = app.locks.enqueue(asks, now=app.clock.now())
    granted = {g.id for g in reply.grants}
    record_grants(app, reply.grants)
    for ask in asks:
        if ask.request_id not in granted:
            run_step(
                app.store, app.clock, run_id,
                lambda s, a=ask: record_lock(s, a.call_id, request=a.request_id, tokens=None, waiting_for=tuple(a.keys)),
                source=SOURCE,
            )  # fmt: skip


def record_grants(app: App, grants: Iterable[Grant]) -> None:
    for g in grants:
        run_id, call_id, _ = g.id.rsplit("/", 2)

        def decide(s: RunState, g: Grant = g, call_id: str = call_id) -> list:  # type: ignore[type-arg]
            return record_lock(s, call_id, request=g.id, tokens=g.tokens, lease_until=g.lease_until)

        try:
            step = run_step(app.store, app.clock, run_id, decide, source=SOURCE)
            keep = uses_grant(step.state, call_id, g.id)
        except UnknownRun:
            keep = False
        if not keep:  # the run moved on (cancelled, ended): pass the lock on
            record_grants(app, app.locks.release(g.id, now=app.clock.now()).grants)


def release_call(app: App, request_id: str | None) -> None:
    """After a call's outcome is recorded: free its locks and record who gets them."""
    if request_id is not None:
        record_grants(app, app.locks.release(request_id, now=app.clock.now()).grants)


def expire_leases(app: App) -> int:
    """Holders that stopped renewing lose their locks; each expiry goes in its run's log."""
    reply = app.locks.expire(now=app.clock.now())
    for request in reply.expired:
        run_id, call_id, _ = request.rsplit("/", 2)
        try:
            run_step(
                app.store,
                app.clock,
                run_id,
                lambda s, c=call_id, r=request: record_lease_expired(s, c, request=r),
                source=SOURCE,
            )
        except UnknownRun:
            pass  # a lock of a run whose log is gone: nothing to record it in
    record_grants(app, reply.grants)
    return len(reply.expired)
