"""The run repository: load → decide → save, the loop every handler runs.

A decision is a pure function of the folded state returning events. The new
events are folded onto the state before they are saved, so an illegal one
raises and is never written; the follow-ups they make due go in the same batch
(decide, then settle: `events.settle.settle_batch`). Saving is one round trip: the store's script appends the
batch at the expected seq *and* queues the commands the batch made due
(`events.dispatch.new_commands`), both or neither — the writer dispatches.
After it, the lock requests the run gave up (`events.lock_step`) are released
and whoever they pass to is told, by a command to its own queue.

A run is pinned to the worker that drives it: the first try decides on the
state this process holds (its last step's, from the cache) without reading
the log, and the append's expected seq checks it. On a ConcurrencyConflict the
run is reloaded and the decision made again: an outcome that already happened
is re-decided on the fresh state, never dropped. "Nothing to do" is believed of
the log, not of a held state. An outcome in hand is appended across a short
Redis outage (`outage_s`), not given up.

A step may carry the next one on (`then`, `events.dispatch.carried_command`):
asked on the state the batch leads to, it names a step this worker takes itself,
whose decision joins the same append; the result says which (`carried`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from events.batch import Appended
from events.dispatch import new_commands
from events.fold import apply, fold
from events.lock_step import released_asks
from events.settle import settle_batch
from events.state import RunState
from events.status import RunStatus
from events.types import Event, RunCreated
from schemas.envelope import Envelope, construct
from schemas.ids import EventId, RunId
from services.adapters.locks.port import Locks
from services.adapters.store.port import EventStore, Outgoing, Snapshot
from services.clock import Clock, new_event_id
from services.errors import ConcurrencyConflict, TooContended, UnknownRun
from services.handlers.outage import through_outage
from services.handlers.state_cache import StateCache, cache_for

if TYPE_CHECKING:  # dramatiq, only where commands are sent (not in `agentledger context`)
    from services.adapters.broker.outbox import Outbox

MAX_CONFLICTS = 50
Decide = Callable[[RunState], Sequence[Event]]
T = TypeVar("T")


Observe = Callable[[Appended], None]  # told of every append that landed


class Step(Protocol):
    """A step the engine can take: findings gathered on a state (I/O allowed), then a
    pure decision on that state and those findings; its events carry `source`."""

    @property
    def source(self) -> str: ...

    def gather(self, s: RunState) -> Any: ...

    def decide(self, s: RunState, found: Any) -> Sequence[Event]: ...


# asked on the state a batch leads to: the step this worker carries on in the same append
Then = Callable[[RunState], Step | None]


def _nothing(_: RunState) -> None:
    return None


@dataclass(frozen=True, slots=True)
class StepResult:
    state: RunState
    appended: tuple[Envelope[Any], ...]
    carried: Step | None = None  # the step `then` named, whose events are in `appended`

    def first(self, kind: type[Any]) -> Any | None:
        return next((e.data for e in self.appended if isinstance(e.data, kind)), None)


def envelopes(
    run_id: str,
    events: Sequence[Event],
    *,
    after_seq: int,
    at: float,
    source: str,
    causation_id: str | None = None,
) -> list[Envelope[Any]]:
    cause = EventId(causation_id) if causation_id else None
    return [
        construct(
            {
                "id": EventId(new_event_id()),
                "run_id": RunId(run_id),
                "seq": after_seq + i + 1,
                "type": e.type,
                "at": at,
                "source": source,
                "causation_id": cause,
                "v": 1,
                "data": e,
            }
        )
        for i, e in enumerate(events)
    ]


class Runs:
    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        outbox: Outbox,
        locks: Locks,
        send: Callable[[Sequence[Outgoing]], None],
        observe: Observe | None = None,
        *,
        cache_max_bytes: int | None = None,
    ):
        self.store = store
        self.observe = observe
        self.clock = clock
        self._outbox = outbox
        self._locks = locks
        self._send = send
        if cache_max_bytes is not None:  # the worker's budget for the states it keeps
            cache_for(store, max_bytes=cache_max_bytes)

    @property
    def cache(self) -> StateCache:
        return cache_for(self.store)

    def load(self, run_id: str) -> RunState | None:
        """The run's state as the log has it now (snapshot + tail)."""
        return self.cache.load(run_id)

    def current(self, run_id: str) -> RunState | None:
        """The state this process holds of the run (or is appending), else the log's."""
        return self.cache.latest(run_id) or self.load(run_id)

    def create(
        self, created: RunCreated, run_id: str, *, source: str, causation_id: str | None
    ) -> RunState:
        """Append a run's first event (and queue its first command); ConcurrencyConflict
        when the run exists already."""
        batch = envelopes(
            run_id, [created], after_seq=0, at=self.clock.now(), source=source,
            causation_id=causation_id,
        )  # fmt: skip
        batch = self.store.as_stored(run_id, batch)
        state = fold(batch)
        assert state is not None
        self._save(run_id, None, state, batch, [state.status], outage_s=0.0)
        return state

    def step(
        self,
        run_id: str,
        decide: Decide,
        *,
        source: str,
        causation_id: str | None = None,
        held: RunState | None = None,
        outage_s: float = 0.0,
        then: Then | None = None,
    ) -> StepResult:
        return self.step_with(
            run_id, _nothing, lambda s, _: decide(s), source=source, causation_id=causation_id,
            held=held, outage_s=outage_s, then=then,
        )  # fmt: skip

    def take(
        self,
        run_id: str,
        step: Step,
        *,
        held: RunState | None = None,
        outage_s: float = 0.0,
        then: Then | None = None,
    ) -> StepResult:
        return self.step_with(
            run_id, step.gather, step.decide, source=step.source, held=held, outage_s=outage_s,
            then=then,
        )  # fmt: skip

    def step_with(
        self,
        run_id: str,
        gather: Callable[[RunState], T],
        decide: Callable[[RunState, T], Sequence[Event]],
        *,
        source: str,
        causation_id: str | None = None,
        held: RunState | None = None,
        outage_s: float = 0.0,
        then: Then | None = None,
    ) -> StepResult:
        """A step whose decision needs findings gathered outside it (tool-set lookups,
        the tools' own rules, the lock table's answer): `gather` runs on each state
        the step decides on, `decide` is pure on that state and those findings."""
        if held is None:
            held = self.cache.latest(run_id)  # pinned: the append's expected seq checks it
        for _ in range(MAX_CONFLICTS):
            state = held or through_outage(
                lambda: self.load(run_id), outage_s=outage_s, doing=f"reading run {run_id!r}"
            )
            if state is None:
                raise UnknownRun(run_id)
            events = list(decide(state, gather(state)))
            if not events and held is not None:
                held = None  # "nothing to do" is believed of the log, not of a held state
                continue
            held = None
            if not events:
                return StepResult(state, ())
            batch, new_state, statuses = self._batch(run_id, state, events, source, causation_id)
            carried = then(new_state) if then is not None else None
            if carried is not None:
                more = list(carried.decide(new_state, carried.gather(new_state)))
                if more:
                    extra, new_state, passed = self._batch(
                        run_id, new_state, more, carried.source, None
                    )
                    batch, statuses = batch + extra, statuses + passed
                else:
                    carried = None
            try:
                self._save(
                    run_id, state, new_state, batch, statuses, outage_s=outage_s,
                    carried=carried.source if carried is not None else None,
                )  # fmt: skip
            except ConcurrencyConflict:
                continue
            return StepResult(new_state, tuple(batch), carried)
        raise TooContended(f"run {run_id!r}: {MAX_CONFLICTS} conflicting appends in a row")

    def _batch(
        self,
        run_id: str,
        state: RunState,
        events: list[Event],
        source: str,
        causation_id: str | None,
    ) -> tuple[list[Envelope[Any]], RunState, list[RunStatus]]:
        """Decide, then settle (`events.settle`): the envelopes of the decided events and
        of the follow-ups they make due, as the store will write them, the state they
        fold to (an illegal event raises before anything is written), and the run's
        status after each."""
        at = self.clock.now()
        batch: list[Envelope[Any]] = []
        statuses: list[RunStatus] = []

        def fold_on(s: RunState, more: Sequence[Event]) -> RunState:
            cause = causation_id if not batch else None  # follow-ups are caused by the batch
            stored = self.store.as_stored(
                run_id,
                envelopes(run_id, more, after_seq=s.seq, at=at, source=source, causation_id=cause),
            )  # the state we go on with is the log's
            for envelope in stored:
                s = apply(s, envelope)
                statuses.append(s.status)
            batch.extend(stored)
            return s

        _, new_state = settle_batch(state, events, fold_on)
        return batch, new_state, statuses

    def _save(
        self,
        run_id: str,
        before: RunState | None,
        after: RunState,
        batch: list[Envelope[Any]],
        statuses: Sequence[RunStatus],
        *,
        outage_s: float,
        carried: str | None = None,
    ) -> None:
        now = self.clock.now()
        messages = self._outbox.messages(after, new_commands(before, after, now=now))
        cache = self.cache
        snapshot = cache.snapshot_due(run_id, after)
        with cache.expecting(run_id, after, batch[-1].id):
            self._append(run_id, batch, before, after, messages, snapshot, outage_s)
            cache.appended(run_id, after, batch[-1].id, snapshot, batch)
        if self.observe is not None:
            self.observe(Appended(before, after, batch, statuses, carried))
        if released := released_asks(before, after):
            through_outage(
                lambda: self._send(self._locks.release(released).notices()),
                outage_s=outage_s,
                doing=f"releasing the locks of run {run_id!r}",
            )

    def _append(
        self,
        run_id: str,
        batch: list[Envelope[Any]],
        before: RunState | None,
        after: RunState,
        messages: list[Outgoing],
        snapshot: Snapshot | None,
        outage_s: float,
    ) -> None:
        """Append (with the snapshot that is due, if one is); across a Redis outage keep
        trying for `outage_s` (a resend of an append that landed is recognised by its
        first event's id)."""
        through_outage(
            lambda: self.store.append(
                run_id,
                batch,
                expected_seq=before.seq if before else 0,
                expected_id=before.last_event_id if before else "",
                live=after.status.watched,
                messages=messages,
                snapshot=snapshot,
            ),
            outage_s=outage_s,
            doing=f"appending to run {run_id!r}",
        )
