"""The run repository: a run's state as the log has it (`load`), as this process
holds it (`current`), and `save` — one batch appended at the state it was decided
on. It owns the states this process keeps and the snapshots written beside the
log (`state_cache`); what decides the batch is the step engine's
(`agentledger.services.handlers.engine`).

Saving is one round trip: the store's script appends the batch at the expected
seq *and* queues the commands the batch made due (`agentledger.events.dispatch.new_commands`),
both or neither — the writer dispatches — with the snapshot that is due, if one
is. After it, the lock requests the run gave up (`agentledger.events.lock_step`) are released
and whoever they pass to is told, by a command to its own queue. A save that
finds the run moved on raises ConcurrencyConflict and writes nothing; an
outcome in hand is saved across a short Redis outage (`outage_s`), not given up.
A state handed out holds its whole past (a snapshot's pages are read with it):
nothing that decides on it reads anything."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentledger.events.batch import Appended
from agentledger.events.dispatch import new_commands
from agentledger.events.fold import fold
from agentledger.events.lock_step import backoffs, released_asks
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event, RunCreated
from agentledger.schemas.envelope import Envelope, construct
from agentledger.schemas.ids import EventId, RunId
from agentledger.services.adapters.locks.port import Locks
from agentledger.services.adapters.store.port import Append, EventStore, Outgoing, Snapshot
from agentledger.services.clock import Clock, new_event_id
from agentledger.services.handlers.lines import Lines
from agentledger.services.handlers.outage import through_outage
from agentledger.services.handlers.state_cache import StateCache, cache_for

if TYPE_CHECKING:  # dramatiq, only where commands are sent (not in `agentledger context`)
    from agentledger.services.adapters.broker.outbox import Outbox

Observe = Callable[[Appended], None]  # told of every append that landed
NewRun = tuple[RunCreated, str, str | None]  # a run's first event, its id, its cause


@dataclass(frozen=True, slots=True)
class Batch:
    """What one save appends: the events as the store will write them, the state they
    fold to, the run's status after each, and the source of the step carried on in
    them, if one was."""

    envelopes: list[Envelope[Any]]
    after: RunState
    statuses: list[RunStatus]
    carried: str | None = None


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
        lines: Lines | None = None,
    ):
        self.store = store
        self.observe = observe
        self.clock = clock
        self._outbox = outbox
        self._locks = locks
        self._send = send
        self.lines = lines  # the tenants' caps of live runs on task queues; None: no cap
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
        return self.held(run_id) or self.load(run_id)

    def held(self, run_id: str) -> RunState | None:
        """The state this process holds of the run, without reading the log (None when
        it holds none): the one a driving worker decides on first."""
        return self.cache.latest(run_id)

    def as_stored(self, run_id: str, batch: list[Envelope[Any]]) -> list[Envelope[Any]]:
        """`batch` as the store will write it (large values moved out, secrets redacted):
        the state a writer goes on with is the log's."""
        return self.store.as_stored(run_id, batch)

    def create(
        self, created: RunCreated, run_id: str, *, source: str, causation_id: str | None
    ) -> RunState:
        """Append a run's first event (and queue its first command); ConcurrencyConflict
        when the run exists already."""
        batch = envelopes(
            run_id, [created], after_seq=0, at=self.clock.now(), source=source,
            causation_id=causation_id,
        )  # fmt: skip
        batch = self.as_stored(run_id, batch)
        state = fold(batch)
        assert state is not None
        self.save(run_id, Batch(batch, state, [state.status]), expected=None)
        return state

    def create_many(self, runs: Sequence[NewRun], *, source: str) -> list[RunState | Exception]:
        """`create` for each run, the appends sent together (`EventStore.append_many`):
        each run's state, or what its own creation raised (ConcurrencyConflict: it
        exists; anything one run's events met is that run's alone)."""
        now = self.clock.now()
        out: list[RunState | Exception] = []
        ready: list[tuple[int, Append, RunState]] = []
        for i, (created, run_id, cause) in enumerate(runs):
            try:
                append, state = self._first(created, run_id, cause, at=now, source=source)
            except Exception as exc:  # noqa: BLE001 -- its own: the caller names or raises it
                out.append(exc)
                continue
            out.append(state)
            ready.append((i, append, state))
        cache = self.cache
        with ExitStack() as held:
            for _, a, state in ready:
                held.enter_context(cache.expecting(a.run_id, state, a.events[-1].id))
            outcomes = self.store.append_many([a for _, a, _ in ready])
            for (i, a, state), outcome in zip(ready, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    out[i] = outcome
                else:
                    cache.appended(a.run_id, state, a.events[-1].id, a.snapshot, a.events)
        if self.observe is not None:
            for i, a, state in ready:
                if out[i] is state:
                    self.observe(Appended(None, state, list(a.events), [state.status], None))
        return out

    def _first(
        self, created: RunCreated, run_id: str, cause: str | None, *, at: float, source: str
    ) -> tuple[Append, RunState]:
        """A new run's append: its first event as stored (and its place in its tenant's
        line on a capped queue, if it is held), and the state it folds to."""
        held = self.lines.held_events(created, run_id) if self.lines is not None else []
        first: list[Event] = [created, *held]
        batch = envelopes(run_id, first, after_seq=0, at=at, source=source, causation_id=cause)
        batch = self.as_stored(run_id, batch)
        state = fold(batch)
        assert state is not None
        messages = self._outbox.messages(state, new_commands(None, state, now=at))
        snapshot = self.cache.snapshot_due(run_id, state)
        return Append(run_id, batch, 0, state.status.watched, messages, "", snapshot), state

    def save(
        self, run_id: str, batch: Batch, *, expected: RunState | None, outage_s: float = 0.0
    ) -> None:
        """Append `batch` if the run is still at `expected` (None: a new run), with the
        commands it makes due and the snapshot that is due; then release the locks the
        run gave up. ConcurrencyConflict, and nothing written, when it moved on."""
        after, events = batch.after, batch.envelopes
        messages = self._outbox.messages(after, new_commands(expected, after, now=self.clock.now()))
        cache = self.cache
        snapshot = cache.snapshot_due(run_id, after)
        with cache.expecting(run_id, after, events[-1].id):
            self._append(run_id, events, expected, after, messages, snapshot, outage_s)
            cache.appended(run_id, after, events[-1].id, snapshot, events)
        if self.observe is not None:
            self.observe(Appended(expected, after, events, batch.statuses, batch.carried))
        if shut := backoffs(expected, after):  # before the release: its slot goes to nobody
            through_outage(
                lambda: self._send(self._locks.close(shut).notices()),
                outage_s=outage_s,
                doing=f"closing the keys a service rate-limited for run {run_id!r}",
            )
        if released := released_asks(expected, after):
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
