"""The tools pool's step (`CallClaim`, for `DriveCall`): validate the turn's
undecided calls, ask the lock table for the turn's locks in proposal order, and
claim the call when it may run — one append, no hop between — then run it and
record its outcome (`run`).

The claim (`ToolCallStarted`) is appended before the tool runs, so a redelivered
message is harmless: a call that is not claimable any more is left alone. So the
claim's append, like the outcome's, is sent again across a Redis outage: a claim
that landed while its reply was lost would otherwise be left alone by everyone.
Who takes these steps, and what they carry on with, is `services.handlers.carry`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.call_step import LockAnswers, asks_for, drive_call, touches_resources, validated
from events.commands import DriveCall
from events.state import RunState
from events.tool_step import record_outcome
from events.types import Event, ToolCallStarted
from events.validation_step import Finding
from services.handlers.app import App
from services.handlers.execution import execute
from services.handlers.findings import findings
from services.handlers.runs import StepResult, Then

SOURCE = "tools"


@dataclass(frozen=True, slots=True)
class Gathered:
    findings: dict[str, Finding]
    locks: LockAnswers


@dataclass(frozen=True, slots=True)
class CallHeld:
    """A call this worker claimed."""

    started: ToolCallStarted


@dataclass(frozen=True)
class CallClaim:
    """Move the call on as far as it can go now (`events.call_step.drive_call`)."""

    app: App
    call_id: str
    source: str = SOURCE

    def gather(self, s: RunState) -> Gathered:
        app = self.app
        found = findings(app.toolset, s, app.settings)
        if not touches_resources(s, found):
            return Gathered(found, LockAnswers())  # no lock to ask: no need to validate first
        v = validated(s, found, known_tools=app.toolset.names, now=app.clock.now())
        return Gathered(found, _ask_locks(app, v, self.call_id))

    def decide(self, s: RunState, g: Gathered) -> list[Event]:
        app = self.app
        return drive_call(
            s, self.call_id, findings=g.findings, known_tools=app.toolset.names, locks=g.locks,
            worker=app.worker, now=app.clock.now(),
        )  # fmt: skip

    def held(self, appended: Sequence[Any]) -> CallHeld | None:
        started = next(
            (e for e in (env.data for env in appended)
             if isinstance(e, ToolCallStarted) and e.call_id == self.call_id),
            None,
        )  # fmt: skip
        return CallHeld(started) if started is not None else None


def run(app: App, run_id: str, step: StepResult, held: CallHeld, then: Then | None) -> StepResult:
    """Run the claimed call and record its outcome (with the step `then` carries on,
    in the same append), across a short Redis outage."""
    started = held.started
    call = step.state.call(started.call_id)
    assert call is not None
    started_at = app.clock.now()
    outcome = execute(app, step.state, call)
    finished_at = app.clock.now()
    return app.runs.step(
        run_id,
        lambda s: record_outcome(
            s, started.call_id, attempt=started.attempt, outcome=outcome, started_at=started_at,
            finished_at=finished_at,
        ),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
        outage_s=app.settings.outcome_retry_s,
        then=then,
    )  # fmt: skip


def _ask_locks(app: App, state: RunState, call_id: str) -> LockAnswers:
    """Every lock the turn still needs, in proposal order (or the call's own waiting
    request, asked again): granted ones now, the others told later by a command."""
    asks = asks_for(state, call_id)
    if not asks:
        return LockAnswers()
    notices = [app.outbox.message(state, DriveCall(state.run_id, a.call_id)) for a in asks]
    reply = app.locks.enqueue(asks, notices)
    return LockAnswers(tuple(asks), {g.grant.id: g.grant for g in reply.grants})
