"""The acceptance pool: claim the run's acceptance for as long as its checks may
take, run every declared check itself (`services.handlers.checks`), record each
result with its evidence and when it was gathered, then the outcome."""

from __future__ import annotations

from events.acceptance_step import CheckResult, claim_s, record_acceptance, start_acceptance
from events.state import RunState
from events.types import AcceptanceStarted, Event
from services.handlers.app import App
from services.handlers.checks import run_check

SOURCE = "accept"


def handle_run_acceptance(app: App, run_id: str) -> None:
    def claim(s: RunState) -> list[Event]:
        if not app.serves(s):
            return []
        lease = claim_s(s.spec, grace_s=app.settings.lease_s)
        return start_acceptance(s, now=app.clock.now(), lease_s=lease)

    step = app.runs.step(run_id, claim, source=SOURCE)
    started = step.first(AcceptanceStarted)
    if started is None:
        return
    state = step.state
    results = []
    for check in state.spec.acceptance:
        began = app.clock.now()
        verdict = run_check(app, state, check)
        results.append(
            CheckResult(
                verdict.what, verdict.passed, verdict.evidence, app.clock.now(), began,
                verdict.depends_on,
            )
        )  # fmt: skip
    app.runs.step(
        run_id,
        lambda s: record_acceptance(s, attempt=started.attempt, results=results),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
        outage_s=app.settings.outcome_retry_s,
    )
