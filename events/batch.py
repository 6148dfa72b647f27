"""Decisions made one after another into one batch: each decides on the state
the earlier ones' events lead to, and all their events are appended together.
This is how a step does several things at once (validate the turn's calls,
record their locks, claim one) without a hop between them. `Appended` is what
one append that landed did, as the run repository tells its observer (metrics)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.events.fold import apply
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event
from agentledger.schemas.envelope import Envelope, construct
from agentledger.schemas.ids import EventId, RunId

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


@dataclass(frozen=True, slots=True)
class Appended:
    """What one append that landed did, as the repository tells the metrics: the
    state before and after it, its events, the run's status after each of them (an
    append that carries a step on passes through statuses it does not end in), and
    the pool of the step carried on in it, if one was."""

    before: RunState | None
    after: RunState
    batch: Sequence[Envelope[Any]]
    statuses: Sequence[RunStatus]
    carried: str | None = None

    def moves(self) -> list[tuple[RunStatus | None, RunStatus]]:
        """The status changes the run made in this append, in order (None: before
        its first event)."""
        was = self.before.status if self.before is not None else None
        found: list[tuple[RunStatus | None, RunStatus]] = []
        for status in self.statuses:
            if status is not was:
                found.append((was, status))
            was = status
        return found
