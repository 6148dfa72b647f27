"""A claim's expiry, its one home. A worker claims a step before doing it (a
tool call's `ToolCallStarted`, the turn's `ModelRequested`, the run's
`AcceptanceStarted`) with a deadline; until that deadline passes no other
worker takes the step, and once it passes the claim is over: a model request or
an acceptance may be claimed again, a tool call's outcome becomes unknown (the
sweeper, `agentledger.events.ticks`), an unknown write may be looked up
(`agentledger.events.resolution_step`). A step with no claim (none made, or its claim ended
with a result) holds nothing.

The rule: a deadline is counted in reachable time. Time in which Redis could
not be reached (`unreachable`: the windows an observer saw, from its last good
call to its first one after) does not count against a claim, because its
holder could neither record a result nor renew anything then: counting it would
take the step from a live holder with its result in hand, and run it twice (a
write sent to a person as unknown, a model call paid twice, the checks run
again). Each window that ends after the claim began and begins before the
deadline (as moved so far) moves the deadline on by its part after the claim's
start. When the start is not known the deadline is taken as the start: only
the part of an outage after the deadline moves it. Without windows this is the
plain rule, `now >= deadline`: a worker that saw no outage passes none, and
only the sweeper keeps the windows it saw (`agentledger.services.loops.sweeper.Reach`)."""

from __future__ import annotations

from collections.abc import Sequence

Window = tuple[float, float]  # (from, until): a time in which Redis could not be reached


def lapses_at(
    deadline: float, *, claimed_at: float | None = None, unreachable: Sequence[Window] = ()
) -> float:
    """The claim's deadline counted in reachable time (see the module)."""
    start = claimed_at if claimed_at is not None else deadline
    for since, until in sorted(unreachable):
        if until <= start:
            continue
        if since >= deadline:
            break
        deadline += until - max(since, start)
    return deadline


def expired(
    deadline: float | None,
    *,
    now: float,
    claimed_at: float | None = None,
    unreachable: Sequence[Window] = (),
) -> bool:
    """No claim holds the step at `now`: none was made, or its deadline has passed
    in reachable time."""
    if deadline is None:
        return True
    return now >= lapses_at(deadline, claimed_at=claimed_at, unreachable=unreachable)
