"""Load -> decide -> append, the loop every handler runs.

A decision is a pure function of the folded state returning events. The new
events are folded onto the state before they are appended, so an illegal one
raises and is never written; follow-ups they make due (`events.settle`) go in
the same append. On a ConcurrencyConflict the run is reloaded and
the decision made again: an outcome that already happened is re-decided on the
fresh state, never dropped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from events.fold import fold
from events.settle import settle
from events.state import RunState
from events.types import Event
from schemas.envelope import Envelope
from services.clock import Clock, new_event_id
from services.errors import ConcurrencyConflict, TooContended, UnknownRun
from services.store.port import EventStore

MAX_CONFLICTS = 50


@dataclass(frozen=True, slots=True)
class StepResult:
    state: RunState
    appended: tuple[Envelope[Any], ...]

    def first(self, kind: type[Any]) -> Any | None:
        return next((e.data for e in self.appended if isinstance(e.data, kind)), None)


def load(store: EventStore, run_id: str) -> RunState | None:
    return fold(store.read(run_id))


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
        Envelope[Any].model_construct(
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
) -> StepResult:
    for _ in range(MAX_CONFLICTS):
        state = load(store, run_id)
        if state is None:
            raise UnknownRun(run_id)
        events = list(decide(state))
        if not events:
            return StepResult(state, ())
        at = clock.now()
        batch = envelopes(
            run_id, events, after_seq=state.seq, at=at, source=source, causation_id=causation_id
        )
        new_state = fold(batch, state)  # raises IllegalTransition before anything is written
        assert new_state is not None
        if follow_ups := settle(new_state):  # made due by this batch: same append
            more = envelopes(run_id, follow_ups, after_seq=new_state.seq, at=at, source=source)
            new_state = fold(more, new_state)
            assert new_state is not None
            batch += more
        try:
            store.append(run_id, batch, expected_seq=state.seq, live=new_state.status.watched)
        except ConcurrencyConflict:
            continue
        return StepResult(new_state, tuple(batch))
    raise TooContended(f"run {run_id!r}: {MAX_CONFLICTS} conflicting appends in a row")
