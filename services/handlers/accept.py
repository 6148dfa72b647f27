"""The acceptance pool: claim the run's acceptance, run every declared check
itself (`services.handlers.checks`), record each result with its evidence and when it
was gathered, then the outcome."""

from __future__ import annotations

from events.acceptance_step import CheckResult, record_acceptance, start_acceptance
from events.state import RunState
from events.types import AcceptanceStarted, Event
from services.handlers.app import App
from services.handlers.checks import run_check
from services.handlers.steps import run_step

SOURCE = "accept"


def handle_run_acceptance(app: App, run_id: str) -> None:
    def claim(s: RunState) -> list[Event]:
        return start_acceptance(s, now=app.clock.now(), lease_s=app.settings.acceptance_lease_s)

    step = run_step(app.store, app.clock, run_id, claim, source=SOURCE)
    started = step.first(AcceptanceStarted)
    if started is None:
        return
    state = step.state
    app.load_tools(state)
    results = []
    for check in state.spec.acceptance:
        began = app.clock.now()
        verdict = run_check(app, state, check)
        results.append(
            CheckResult(
                verdict.what,
                verdict.passed,
                verdict.evidence,
                app.clock.now(),
                began,
                verdict.depends_on,
            )
        )
    run_step(
        app.store,
        app.clock,
        run_id,
        lambda s: record_acceptance(s, attempt=started.attempt, results=results),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
    )
