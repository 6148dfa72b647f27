"""Decisions made one after another into one batch: each decides on the state
the earlier ones' events lead to, and all their events are appended together.
This is how a step does several things at once (validate the turn's calls,
record their locks, claim one) without a hop between them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from events.fold import apply
from events.state import RunState
from events.types import Event
from schemas.envelope import construct
from schemas.ids import EventId, RunId

Decision = Callable[[RunState], list[Event]]


def provisional(s: RunState, events: Iterable[Event], *, at: float) -> RunState:
    """The state after `events`, for deciding what follows them in the same batch
    (the events are checked against the tables here, as `apply` always does)."""
    for e in events:
        env = construct({
            "id": EventId(""), "run_id": RunId(s.run_id), "seq": s.seq + 1, "type": e.type,
            "at": at, "source": "", "causation_id": None, "v": 1, "data": e,
        })  # fmt: skip
        s = apply(s, env)
    return s


def chain(s: RunState, decisions: Sequence[Decision], *, at: float) -> list[Event]:
    out: list[Event] = []
    last = len(decisions) - 1
    for i, decide in enumerate(decisions):
        events = decide(s)
        if events:
            if i < last:  # the state after the last decision is the writer's to fold
                s = provisional(s, events, at=at)
            out += events
    return out
