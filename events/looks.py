"""When the sweeper must next look at a run, from its folded state alone.

The sweeper is the backstop for lost messages and the clock of the deadlines:
a run with work due to a worker (a command, a call in flight, a model or
acceptance claim) is looked at again a lease after the last look or progress,
or sooner when a deadline of its comes first (`agentledger.events.ticks.next_tick`).

A **parked** run waits for a person (an approval) with nothing due to any
worker and nothing in flight: no lost message can be holding it, and only time
or a new event moves it. It is looked at when its earliest deadline comes (the
approval's expiry, the wall-clock budget), not every lease; any new event makes
the writer score it afresh (the store's live index), so an answer, a cancel or
a late outcome puts it back under the lease. A run not watched (ended, or
awaiting a human with nothing to time) is not looked at at all (None).

Deadlines already past at `at` are not waited for (the look at `at` dealt with
them or could not): the run is looked at again after a lease, never in a loop."""

from __future__ import annotations

from collections.abc import Sequence

from agentledger.events.claims import Window
from agentledger.events.dispatch import due_commands
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.ticks import next_tick


def next_look(
    s: RunState, *, at: float, lease_s: float, unreachable: Sequence[Window] = ()
) -> float | None:
    """The time the sweeper should next look at the run, given it was last looked
    at (or moved) at `at`; None when it need not be looked at."""
    if not s.status.watched:
        return None
    coming = [t for t in _deadlines(s, unreachable) if t > at]
    if parked(s, now=at) and coming:
        return min(coming)
    return min([at + lease_s, *coming])


def parked(s: RunState, *, now: float) -> bool:
    """Waiting for a person, with nothing due to a worker and nothing in flight."""
    return (
        s.status is RunStatus.AWAITING_APPROVAL
        and not s.in_flight
        and s.model_claim_deadline is None
        and s.acceptance_claim_deadline is None
        and not due_commands(s, now=now, redrive=True)
    )


def wall_clock_at(s: RunState) -> float | None:
    """When the run's wall-clock budget runs out (None: it has none, or it is
    cancelling, which the budget no longer ends)."""
    limit = s.spec.budgets.max_wall_clock_s
    if limit is None or s.status is RunStatus.CANCELLING:
        return None
    return (s.created_at if s.clock_from is None else s.clock_from) + limit


def _deadlines(s: RunState, unreachable: Sequence[Window]) -> list[float]:
    found = (next_tick(s, unreachable=unreachable), wall_clock_at(s))
    return [t for t in found if t is not None]
