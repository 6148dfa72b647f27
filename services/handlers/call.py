"""The tools pool's step (`DriveCall`): validate the turn's undecided calls, ask
the lock table for the turn's locks in proposal order, and claim the call when
it may run — one append, no hop between — then run it and record its outcome.

The claim (`ToolCallStarted`) is appended before the tool runs, so a redelivered
message is harmless: a call that is not claimable any more is left alone. So the
claim's append, like the outcome's, is sent again across a Redis outage: a claim
that landed while its reply was lost would otherwise be left alone by everyone."""

from __future__ import annotations

from dataclasses import dataclass

from events.call_step import LockAnswers, asks_for, drive_call, validated
from events.commands import DriveCall
from events.state import RunState
from events.tool_step import record_outcome
from events.types import Event, ToolCallStarted
from events.validation_step import Finding
from services.errors import UnknownRun
from services.handlers.app import App
from services.handlers.execution import execute
from services.handlers.findings import findings

SOURCE = "tools"


@dataclass(frozen=True, slots=True)
class Gathered:
    findings: dict[str, Finding]
    locks: LockAnswers


def handle_drive_call(app: App, run_id: str, call_id: str) -> None:
    state = app.runs.current(run_id)
    if state is None:
        raise UnknownRun(run_id)
    if not app.serves(state):
        return

    def gather(s: RunState) -> Gathered:
        found = findings(app.toolset, s)
        v = validated(s, found, known_tools=app.toolset.names, now=app.clock.now())
        return Gathered(found, _ask_locks(app, v, call_id))

    def decide(s: RunState, g: Gathered) -> list[Event]:
        return drive_call(
            s, call_id, findings=g.findings, known_tools=app.toolset.names, locks=g.locks,
            worker=app.worker, now=app.clock.now(),
        )  # fmt: skip

    # A claim that lands while its reply is lost is known only here (nobody else will
    # run it): sent again across an outage, the store recognises it as landed.
    step = app.runs.step_with(
        run_id, gather, decide, source=SOURCE, held=state, outage_s=app.settings.outcome_retry_s
    )
    started = next(
        (e for e in (env.data for env in step.appended)
         if isinstance(e, ToolCallStarted) and e.call_id == call_id),
        None,
    )  # fmt: skip
    if started is None:
        return
    call = step.state.call(call_id)
    assert call is not None
    started_at = app.clock.now()
    outcome = execute(app, step.state, call)
    finished_at = app.clock.now()
    app.runs.step(
        run_id,
        lambda s: record_outcome(
            s, call_id, attempt=started.attempt, outcome=outcome, started_at=started_at,
            finished_at=finished_at,
        ),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
        outage_s=app.settings.outcome_retry_s,
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
