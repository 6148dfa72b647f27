"""The sweeper: re-drives every live run that has made no progress within the
lease, from the event log alone, whatever the broker lost. Claims whose worker
went silent past their deadline are expired first (a write's outcome becomes
unknown and the run goes to a human; a read may be tried again)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from events.commands import Command
from events.dispatch import due_commands
from events.tool_step import expire_claims
from services.app import App
from services.steps import run_step

SOURCE = "sweeper"


def sweep_once(app: App, send: Callable[[Command], None]) -> int:
    """Look at idle live runs once; return how many were re-driven."""
    now = app.clock.now()
    redriven = 0
    for run_id in app.store.idle_live_runs(idle_since=now - app.settings.lease_s):
        step = run_step(
            app.store, app.clock, run_id, lambda s: expire_claims(s, now=now), source=SOURCE
        )
        commands = due_commands(step.state, now=now)
        for command in commands:
            send(command)
        redriven += bool(commands)
        app.store.touch(run_id, at=now)
    return redriven


def run_sweeper(app: App, send: Callable[[Command], None], stop: threading.Event) -> None:
    while not stop.wait(app.settings.sweep_interval_s):
        sweep_once(app, send)
