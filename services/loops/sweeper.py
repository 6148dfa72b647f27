"""The sweeper: re-drives every live run that has made no progress within the
lease, from the event log alone, whatever the broker lost. First it lets time
decide (`events.ticks`): claims whose worker went silent, approvals nobody
answered, the wall-clock budget."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from events.commands import Command
from events.dispatch import due_commands
from events.errors import CoreError
from events.ticks import on_tick
from schemas.errors import SchemaError
from services.errors import UnknownRun
from services.handlers.app import App
from services.handlers.schedule import expire_leases
from services.handlers.steps import run_step

SOURCE = "sweeper"
log = logging.getLogger(__name__)


def sweep_once(app: App, send: Callable[[Command], None]) -> int:
    """Look at idle live runs once; return how many were re-driven."""
    now = app.clock.now()
    idle = app.store.idle_live_runs(idle_since=now - app.settings.lease_s)
    expire_leases(app)  # after choosing: recording an expiry is not progress of the run
    redriven = 0
    for run_id in idle:
        try:
            step = run_step(
                app.store, app.clock, run_id, lambda s: on_tick(s, now=now), source=SOURCE
            )
        except (CoreError, SchemaError, UnknownRun) as exc:
            # one broken log must not stop the sweep of every other run
            log.error("run %r cannot be folded, not swept: %s", run_id, exc)
            app.store.touch(run_id, at=now)  # look again after a lease, not every pass
            continue
        commands = due_commands(step.state, now=now)
        for command in commands:
            send(command)
        redriven += bool(commands)
        app.store.touch(run_id, at=now)
    return redriven


def run_sweeper(app: App, send: Callable[[Command], None], stop: threading.Event) -> None:
    while not stop.wait(app.settings.sweep_interval_s):
        sweep_once(app, send)
