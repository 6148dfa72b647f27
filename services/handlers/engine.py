"""The step engine: the one door through which anything is appended to a run,
`Engine.take(run, step)`.

A step (`Step`) gathers what its decision needs — this worker's tool set, the
context view, the lock table's answer: I/O allowed — and then decides, purely,
on a state and those findings: the events to append, [] when it is done already.
Taking it reads top to bottom:

1. the state to decide on: the one this process holds (a run is pinned to the
   worker that drives it; the append's expected seq checks it), else the log's —
   whole, its snapshot's pages read with it (`agentledger.services.handlers.runs`);
2. the batch, planned before anything is saved: gather, decide, fold the events
   (an illegal one raises and nothing is written), settle the follow-ups they
   make due (`agentledger.events.settle`); for a step composed with the one it carries on
   (`Then`), the step named on the state that batch leads to is gathered and
   decided into the same batch;
3. the save (`Runs.save`): one append at the expected seq, the commands the batch
   made due queued with it.

So every gathering — the lock ask included — happens before the save loop; the
loop only saves. A ConcurrencyConflict means the run moved on: it is read again
and the batch planned again on it (an outcome in hand is re-decided on the fresh
state, never dropped; a call's step asks the lock table only for what it has not
asked yet, `agentledger.services.handlers.call`). "Nothing to do" is believed of the log, not
of a held state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from agentledger.events.fold import apply
from agentledger.events.run_caps import release
from agentledger.events.settle import settle_batch
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event
from agentledger.schemas.envelope import Envelope
from agentledger.services.errors import ConcurrencyConflict, TooContended, UnknownRun
from agentledger.services.handlers.outage import through_outage
from agentledger.services.handlers.runs import Batch, Runs, envelopes

MAX_CONFLICTS = 50
RELEASE_SOURCE = "run_caps"
F = TypeVar("F")


class Step(Protocol[F]):
    """A step the engine can take: findings gathered on a state (I/O allowed), then a
    pure decision on that state and those findings; its events carry `source`."""

    @property
    def source(self) -> str: ...

    def gather(self, s: RunState) -> F: ...

    def decide(self, s: RunState, found: F) -> Sequence[Event]: ...


Next = Callable[[RunState], Step[Any] | None]  # the step carried on, named on a batch's state


@dataclass(frozen=True, slots=True)
class Then:
    """`first`, then — in the same append — the step `next` names on the state
    `first`'s batch leads to, if it names one and it decides anything (carrying on:
    `agentledger.services.handlers.carry`)."""

    first: Step[Any]
    next: Next


@dataclass(frozen=True, slots=True)
class Decided:
    """A step whose decision needs nothing gathered."""

    source: str
    decision: Callable[[RunState], Sequence[Event]]

    def gather(self, s: RunState) -> None:
        return None

    def decide(self, s: RunState, found: None) -> Sequence[Event]:
        return self.decision(s)


@dataclass(frozen=True, slots=True)
class Taken:
    """What taking a step did: the run's state after it, the events appended (none
    when the step was done already), and the step carried on in the same append."""

    state: RunState
    appended: tuple[Envelope[Any], ...]
    carried: Step[Any] | None = None

    def first(self, kind: type[Any]) -> Any | None:
        return next((e.data for e in self.appended if isinstance(e.data, kind)), None)


@dataclass(frozen=True, slots=True)
class _Plan:
    batch: Batch
    carried: Step[Any] | None


class Engine:
    def __init__(self, runs: Runs):
        self.runs = runs

    def take(
        self,
        run_id: str,
        step: Step[Any] | Then,
        *,
        held: RunState | None = None,
        outage_s: float = 0.0,
        causation_id: str | None = None,
    ) -> Taken:
        """Decide `step` on the run and append what it decided. `held`: the state to
        decide on first (this process's own, e.g. of its claim); `outage_s`: how long
        to keep reading and appending across a Redis outage (an outcome in hand)."""
        state = held or self.runs.held(run_id)
        pinned = state is not None
        if state is None:
            state = self._load(run_id, outage_s)
        plan = self._plan(state, step, causation_id)
        for _ in range(MAX_CONFLICTS):
            if plan is None and not pinned:
                return Taken(state, ())
            if plan is not None:
                try:
                    self.runs.save(run_id, plan.batch, expected=state, outage_s=outage_s)
                except ConcurrencyConflict:
                    pass
                else:
                    self._left_line(state, plan.batch.after, outage_s)
                    return Taken(plan.batch.after, tuple(plan.batch.envelopes), plan.carried)
            pinned = False  # "nothing to do" is believed of the log; a conflict reads it
            state = self._load(run_id, outage_s)
            plan = self._plan(state, step, causation_id)
        raise TooContended(f"run {run_id!r}: {MAX_CONFLICTS} conflicting appends in a row")

    def _left_line(self, before: RunState, after: RunState, outage_s: float) -> None:
        """A run that ended leaves its tenant's line on a capped queue; the held runs
        that take its place are released (`agentledger.services.handlers.lines`)."""
        if (lines := self.runs.lines) is not None:
            through_outage(
                lambda: lines.left(before, after, self.release_held),
                outage_s=outage_s,
                doing=f"taking run {after.run_id!r} out of its tenant's line",
            )

    def release_held(self, run_id: str, queue: str, tenant: str) -> None:
        """Record a held run's release from the line of `tenant` on `queue` (nothing when
        it is not held any more, or not in that line): its first model request is
        queued with it."""
        clock = self.runs.clock

        def decide(s: RunState) -> list[Event]:
            return release(s, now=clock.now(), queue=queue, tenant=tenant)

        self.take(run_id, Decided(RELEASE_SOURCE, decide))

    def _load(self, run_id: str, outage_s: float) -> RunState:
        state = through_outage(
            lambda: self.runs.load(run_id), outage_s=outage_s, doing=f"reading run {run_id!r}"
        )
        if state is None:
            raise UnknownRun(run_id)
        return state

    def _plan(
        self, state: RunState, step: Step[Any] | Then, causation_id: str | None
    ) -> _Plan | None:
        """The batch `step` decides on `state` (and the step it carries on), or None
        when it decides nothing."""
        first, then = (step.first, step.next) if isinstance(step, Then) else (step, None)
        events = first.decide(state, first.gather(state))
        if not events:
            return None
        batch = self._batch(state, events, first.source, causation_id)
        carried = then(batch.after) if then is not None else None
        if carried is None:
            return _Plan(batch, None)
        more = carried.decide(batch.after, carried.gather(batch.after))
        if not more:
            return _Plan(batch, None)
        extra = self._batch(batch.after, more, carried.source, None)
        joined = Batch(
            batch.envelopes + extra.envelopes, extra.after, batch.statuses + extra.statuses,
            carried.source,
        )  # fmt: skip
        return _Plan(joined, carried)

    def _batch(
        self, state: RunState, events: Sequence[Event], source: str, causation_id: str | None
    ) -> Batch:
        """Decide, then settle (`agentledger.events.settle`): the envelopes of the decided events and
        of the follow-ups they make due, as the store will write them, the state they
        fold to (an illegal event raises before anything is written), and the run's
        status after each."""
        at = self.runs.clock.now()
        run_id = state.run_id
        out: list[Envelope[Any]] = []
        statuses: list[RunStatus] = []

        def fold_on(s: RunState, more: Sequence[Event]) -> RunState:
            cause = causation_id if not out else None  # follow-ups are caused by the batch
            stored = self.runs.as_stored(
                run_id,
                envelopes(run_id, more, after_seq=s.seq, at=at, source=source, causation_id=cause),
            )  # the state we go on with is the log's
            for envelope in stored:
                s = apply(s, envelope)
                statuses.append(s.status)
            out.extend(stored)
            return s

        _, after = settle_batch(state, list(events), fold_on)
        return Batch(out, after, statuses)
