"""A tenant's cap of live runs on a task queue (issue 37.3), pure: the operator's
`AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT=QUEUE=N,…` (the settings form of the issue's
`queues: {NAME: {max_live_runs_per_tenant: N}}`) read, and the line each tenant
has on a capped queue.

A line is the tenant's runs on the queue that count (`live`, by run id: removing
one twice is removing it once, so a run whose end is told twice frees one place)
and the runs held behind them, first come first (`held`). A new run goes live
while fewer than the cap are live and nobody is held before it; otherwise it is
held, *created and recorded* (`RunHeld` with its place), never refused. When a
live run ends, or a held one is cancelled, the first held runs take the places
that are free (`finish`), each then recorded `RunReleased` and started; its wall
clock starts then (the time it was held is the tenant's queueing, not its run's).
The Redis script (`agentledger.services.adapters.run_caps`) keeps the same line
atomically across intake processes and workers; the tenant is the principal's the
intake checked against the publisher's grant, never a name the spec chose."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from agentledger.events.limits import parse_key_max
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event, RunHeld, RunReleased
from agentledger.schemas.names import QUEUE_PATTERN

_QUEUE = re.compile(QUEUE_PATTERN)
Caps = tuple[tuple[str, int], ...]  # (task queue, most live runs of one tenant on it)


def parse_queue_caps(text: str) -> dict[str, int]:
    """`QUEUE=N,QUEUE=N`; a bad entry raises ValueError naming it."""

    def check(queue: str) -> None:
        if not _QUEUE.match(queue):
            raise ValueError(f"{queue!r} is not a task queue name (1-64 of A-Z a-z 0-9 _ . -)")

    return parse_key_max(text, check, what="QUEUE=N")


def cap_of(caps: Caps, queue: str) -> int | None:
    """The most live runs one tenant may have on `queue` (None: no cap)."""
    return next((most for q, most in caps if q == queue), None)


@dataclass(frozen=True, slots=True)
class Line:
    """One tenant's runs on one capped queue: those that count, and those held."""

    live: frozenset[str] = frozenset()
    held: tuple[str, ...] = ()


def admit(line: Line, run_id: str, most: int) -> tuple[Line, int]:
    """The line with `run_id` in it, and its place: 0 live, k held k-th. Asking
    again for a run already in the line changes nothing."""
    if run_id in line.live:
        return line, 0
    if run_id in line.held:
        return line, line.held.index(run_id) + 1
    if len(line.live) < most and not line.held:
        return replace(line, live=line.live | {run_id}), 0
    return replace(line, held=(*line.held, run_id)), len(line.held) + 1


def finish(line: Line, run_id: str, most: int) -> tuple[Line, tuple[str, ...]]:
    """The line without `run_id` (ended, or cancelled while held), and the held
    runs that now go live, first come first."""
    live = line.live - {run_id}
    held = tuple(r for r in line.held if r != run_id)
    free = max(0, most - len(live))
    released = held[:free]
    return Line(live | frozenset(released), held[free:]), released


def held_event(tenant: str, queue: str, place: int, most: int) -> list[Event]:
    """What the run's creation records beside `RunCreated` for its place (0: nothing)."""
    return [RunHeld(tenant=tenant, queue=queue, place=place, max_live=most)] if place else []


def release(s: RunState, *, now: float, queue: str, tenant: str) -> list[Event]:
    """A held run's release from the line of `tenant` on `queue`: [] when it is not
    held any more (a release told twice is one) or is held in another line (a run id
    a publisher named in its own request lands in its own line, never releasing
    another tenant's run)."""
    if s.status is not RunStatus.HELD or not belongs(s, queue=queue, tenant=tenant):
        return []
    return [RunReleased(held_s=round(max(0.0, now - s.created_at), 3))]


def belongs(s: RunState, *, queue: str, tenant: str) -> bool:
    """Whether the run is one of `tenant`'s on `queue` (its line's)."""
    return s.queue == queue and s.spec.principal.tenant == tenant


def left_line(before: RunState | None, after: RunState) -> bool:
    """Whether the batch from `before` to `after` took the run out of its line: it ended."""
    return after.status.terminal and (before is None or not before.status.terminal)


def held_detail(e: RunHeld) -> str:
    return (
        f"place {e.place} in the line of tenant {e.tenant!r} on queue {e.queue!r} "
        f"(at most {e.max_live} of its runs live there)"
    )
