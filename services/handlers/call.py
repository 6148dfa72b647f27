"""The tools pool's step (`CallClaim`, for `DriveCall`): validate the turn's
undecided calls, ask the lock table for the turn's locks in proposal order, and
claim the call when it may run — one append, no hop between — then run it
(`run`), which gives the step that records its outcome.

The lock ask is the step's gathering, done before the engine saves anything; a
step asks the lock table once per request (a save that conflicts is planned
again on the fresh state with the answers in hand: only a request never asked
is asked then).

The claim (`ToolCallStarted`) is appended before the tool runs, so a redelivered
message is harmless: a call that is not claimable any more is left alone. So the
claim's append, like the outcome's, is sent again across a Redis outage: a claim
that landed while its reply was lost would otherwise be left alone by everyone.
Who takes these steps, and what they carry on with, is `agentledger.services.handlers.carry`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentledger.events.call_step import (
    LockAnswers,
    asks_for,
    drive_call,
    touches_resources,
    validated,
)
from agentledger.events.commands import DriveCall
from agentledger.events.delegate import DELEGATE
from agentledger.events.locks import Grant
from agentledger.events.state import RunState
from agentledger.events.tool_step import record_outcome
from agentledger.events.types import Event, ToolCallStarted
from agentledger.events.validation_step import Finding
from agentledger.services.handlers import delegate
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.handlers.execution import execute
from agentledger.services.handlers.findings import findings

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
    """Move the call on as far as it can go now (`agentledger.events.call_step.drive_call`)."""

    app: App
    call_id: str
    source: str = SOURCE
    # request id -> what the lock table answered (its grant, or None: queued), as asked
    _asked: dict[str, Grant | None] = field(default_factory=dict, compare=False, repr=False)

    def gather(self, s: RunState) -> Gathered:
        app = self.app
        found = findings(app.toolset, s, app.settings)
        if not touches_resources(s, found):
            return Gathered(found, LockAnswers())  # no lock to ask: no need to validate first
        v = validated(s, found, known_tools=app.toolset.names, now=app.clock.now())
        return Gathered(found, self._ask_locks(v))

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

    def _ask_locks(self, state: RunState) -> LockAnswers:
        """Every lock the turn still needs, in proposal order (or the call's own waiting
        request, asked again): granted ones now, the others told later by a command.
        A request this step asked already is not asked again."""
        asks = asks_for(state, self.call_id)
        new = [a for a in asks if a.request_id not in self._asked]
        if new:
            app = self.app
            notices = [app.outbox.message(state, DriveCall(state.run_id, a.call_id)) for a in new]
            granted = {g.grant.id: g.grant for g in app.locks.enqueue(new, notices).grants}
            self._asked.update((a.request_id, granted.get(a.request_id)) for a in new)
        answers = {a.request_id: self._asked[a.request_id] for a in asks}
        waiting = [k for a in asks if answers[a.request_id] is None for k in a.limits]
        looks = self.app.locks.look(sorted(set(waiting))) if waiting else {}
        slots = {k: (v.holders, v.closed_until) for k, v in looks.items()}
        granted = {r: g for r, g in answers.items() if g is not None}
        return LockAnswers(tuple(asks), granted, slots)


def run(app: App, state: RunState, held: CallHeld) -> Decided:
    """Run the claimed call (on `state`, the claim's); the step that records its outcome."""
    started = held.started
    call = state.call(started.call_id)
    assert call is not None
    if call.name == DELEGATE:  # no thread waits for a child run: its end tells the run
        return delegate.start(app, state, call)
    started_at = app.clock.now()
    outcome = execute(app, state, call)
    finished_at = app.clock.now()
    return Decided(
        SOURCE,
        lambda s: record_outcome(
            s, started.call_id, attempt=started.attempt, outcome=outcome, started_at=started_at,
            finished_at=finished_at,
        ),
    )  # fmt: skip
