"""The acceptance pool's step: claim the run's acceptance for as long as its
checks may take (`AcceptClaim`: held to the operator's maximum and the run's
wall clock), run every declared check itself (`agentledger.services.handlers.checks`),
record each result with its evidence and when it was gathered, then the outcome
(`check`: it gives the step that records them). The checks stop once the run stops: no check starts on a cancelled
run or past its wall clock, and one that was running when the run stopped is
recorded as stopped (`AcceptanceCheckStopped`), with the signals it got. Who
takes these steps, and what they carry on with, is `agentledger.services.handlers.carry`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from agentledger.events.acceptance_step import (
    CheckResult,
    claim_s,
    record_acceptance,
    record_check_stopped,
    start_acceptance,
    wall_clock_left,
)
from agentledger.events.state import RunState
from agentledger.events.types import AcceptanceStarted, Event
from agentledger.services.handlers.app import App
from agentledger.services.handlers.checks import Verdict, run_check
from agentledger.services.handlers.engine import Decided
from agentledger.services.handlers.execution import RunWatch
from agentledger.services.handlers.snapshotting import around_check

SOURCE = "accept"


@dataclass(frozen=True, slots=True)
class AcceptHeld:
    """An acceptance this worker claimed."""

    started: AcceptanceStarted


@dataclass(frozen=True)
class AcceptClaim:
    """Claim the run's acceptance when it is due (`agentledger.events.acceptance_step.start_acceptance`)."""

    app: App
    source: str = SOURCE

    def gather(self, s: RunState) -> bool:
        return self.app.serves(s)

    def decide(self, s: RunState, served: bool) -> list[Event]:
        if not served:
            return []
        grace, now = self.app.settings.lease_s, self.app.clock.now()
        lease = claim_s(s.spec, grace_s=grace, most_s=self.app.settings.max_command_timeout_s)
        left = wall_clock_left(s, now=now)  # no check runs past the run's wall clock
        lease = min(lease, max(0.0, left) + grace) if left is not None else lease
        return start_acceptance(s, now=now, lease_s=lease)

    def held(self, appended: Sequence[Any]) -> AcceptHeld | None:
        started = next((e.data for e in appended if isinstance(e.data, AcceptanceStarted)), None)
        return AcceptHeld(started) if started is not None else None


def check(app: App, state: RunState, held: AcceptHeld) -> Decided | None:
    """Run the run's checks (on `state`, the claim's); the step that records their
    results and the outcome. A check the run's stop stopped is recorded here and
    then, and nothing is carried on after it (None)."""
    attempt = held.started.attempt
    watch = RunWatch(app, state)
    results = []
    for index, spec_check in enumerate(state.spec.acceptance):
        began = app.clock.now()
        left = wall_clock_left(state, now=began)
        if watch.stop_requested() is not None or (left is not None and left <= 0):
            break  # the run stopped, or is out of time: no more checks (recorded below)
        verdict, judged = around_check(
            app.snapshots, state.workspace, partial(run_check, app, state, spec_check)
        )
        if verdict.stopped is not None:
            _stopped(app, state.run_id, attempt, index, verdict)
            return None
        results.append(
            CheckResult(
                verdict.what, verdict.passed, verdict.evidence, app.clock.now(), began,
                verdict.depends_on, judged,
            )
        )  # fmt: skip
    now = app.clock.now()
    return Decided(
        SOURCE, lambda s: record_acceptance(s, attempt=attempt, results=results, now=now)
    )


def _stopped(app: App, run_id: str, attempt: int, index: int, verdict: Verdict) -> None:
    """Record the check the run's stop stopped (the run moved on: its state is the log's)."""
    stop = verdict.stopped
    assert stop is not None
    app.engine.take(
        run_id,
        Decided(
            SOURCE,
            lambda s: record_check_stopped(
                s,
                attempt=attempt,
                index=index,
                check=verdict.what,
                requested_at=stop.requested_at,
                stopped_at=stop.stopped_at,
                signals=stop.signals,
                detail=stop.detail,
            ),
        ),  # fmt: skip
        outage_s=app.settings.outcome_retry_s,
    )
