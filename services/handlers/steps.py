"""Load -> decide -> append, the loop every handler runs.

A decision is a pure function of the folded state returning events. The new
events are folded onto the state before they are appended, so an illegal one
raises and is never written; follow-ups they make due (`events.settle`) go in
the same append. On a ConcurrencyConflict the run is reloaded and
the decision made again: an outcome that already happened is re-decided on the
fresh state, never dropped.

`load` is the fold of the run's log, read as snapshot + tail
(`services.handlers.state_cache`). A handler that holds the state its own last step
returned passes it as `held`: the first try decides on it without reading the
log, and the append's expected seq checks it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from events.fold import fold
from events.settle import settle
from events.state import RunState
from events.types import Event
from schemas.envelope import Envelope
from services.adapters.store.port import EventStore
from services.clock import Clock, new_event_id
from services.errors import ConcurrencyConflict, TooContended, UnknownRun
from services.handlers.state_cache import cache_for

MAX_CONFLICTS = 50
_ENVELOPE = Envelope[
    Any
]  # looked up once: pydantic's generic lookup is slow, and not always cached


@dataclass(frozen=True, slots=True)
class StepResult:
    state: RunState
    appended: tuple[Envelope[Any], ...]

    def first(self, kind: type[Any]) -> Any | None:
        return next((e.data for e in self.appended if isinstance(e.data, kind)), None)


def load(store: EventStore, run_id: str) -> RunState | None:
    return cache_for(store).load(run_id)


def load_many(
    store: EventStore, run_ids: Sequence[str], *, ends: Mapping[str, tuple[int, str]] | None = None
) -> list[RunState | None]:
    """The states of several runs, read from the store at once; a run whose log is known
    to end at (seq, event id) and whose cached state ends there is not read at all."""
    return cache_for(store).load_many(run_ids, ends=ends)


def envelopes(
    run_id: str,
    events: Sequence[Event],
    *,
    after_seq: int,
    at: float,
    source: str,
    causation_id: str | None = None,
) -> list[Envelope[Any]]:
    return [
        _ENVELOPE.model_construct(
            id=new_event_id(),
            run_id=run_id,
            seq=after_seq + i + 1,
            type=e.type,
            at=at,
            source=source,
            causation_id=causation_id,
            v=1,
            data=e,
        )
        for i, e in enumerate(events)
    ]


def run_step(
    store: EventStore,
    clock: Clock,
    run_id: str,
    decide: Callable[[RunState], Sequence[Event]],
    *,
    source: str,
    causation_id: str | None = None,
    held: RunState | None = None,
) -> StepResult:
    for _ in range(MAX_CONFLICTS):
        state = held or load(store, run_id)
        if state is None:
            raise UnknownRun(run_id)
        events = list(decide(state))
        if not events and held is not None:
            held = None  # "nothing to do" is believed of the log, not of a held state
            continue
        held = None
        if not events:
            return StepResult(state, ())
        at = clock.now()
        batch = envelopes(
            run_id, events, after_seq=state.seq, at=at, source=source, causation_id=causation_id
        )
        batch = store.as_stored(run_id, batch)  # the state we go on with is the log's
        new_state = fold(batch, state)  # raises IllegalTransition before anything is written
        assert new_state is not None
        if follow_ups := settle(new_state):  # made due by this batch: same append
            more = envelopes(run_id, follow_ups, after_seq=new_state.seq, at=at, source=source)
            more = store.as_stored(run_id, more)
            new_state = fold(more, new_state)
            assert new_state is not None
            batch += more
        cache = cache_for(store)
        with cache.expecting(run_id, new_state, batch[-1].id):
            try:
                store.append(run_id, batch, expected_seq=state.seq, live=new_state.status.watched)
            except ConcurrencyConflict:
                continue
            cache.appended(run_id, new_state, batch[-1].id)
        return StepResult(new_state, tuple(batch))
    raise TooContended(f"run {run_id!r}: {MAX_CONFLICTS} conflicting appends in a row")
