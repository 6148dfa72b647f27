"""The acceptance pool's step: claim the run's acceptance for as long as its
checks may take (`AcceptClaim`), run every declared check itself
(`services.handlers.checks`), record each result with its evidence and when it
was gathered, then the outcome (`accept`). Who takes these steps, and what they
carry on with, is `services.handlers.carry`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.acceptance_step import CheckResult, claim_s, record_acceptance, start_acceptance
from events.state import RunState
from events.types import AcceptanceStarted, Event
from services.handlers.app import App
from services.handlers.checks import run_check
from services.handlers.runs import StepResult, Then

SOURCE = "accept"


@dataclass(frozen=True, slots=True)
class AcceptHeld:
    """An acceptance this worker claimed."""

    started: AcceptanceStarted


@dataclass(frozen=True)
class AcceptClaim:
    """Claim the run's acceptance when it is due (`events.acceptance_step.start_acceptance`)."""

    app: App
    source: str = SOURCE

    def gather(self, s: RunState) -> bool:
        return self.app.serves(s)

    def decide(self, s: RunState, served: bool) -> list[Event]:
        if not served:
            return []
        lease = claim_s(s.spec, grace_s=self.app.settings.lease_s)
        return start_acceptance(s, now=self.app.clock.now(), lease_s=lease)

    def held(self, appended: Sequence[Any]) -> AcceptHeld | None:
        started = next((e.data for e in appended if isinstance(e.data, AcceptanceStarted)), None)
        return AcceptHeld(started) if started is not None else None


def accept(
    app: App, run_id: str, step: StepResult, held: AcceptHeld, then: Then | None
) -> StepResult:
    """Run the run's checks and record their results and the outcome (with the step
    `then` carries on, in the same append), across a short Redis outage."""
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
    attempt = held.started.attempt
    return app.runs.step(
        run_id,
        lambda s: record_acceptance(s, attempt=attempt, results=results),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
        outage_s=app.settings.outcome_retry_s,
        then=then,
    )
