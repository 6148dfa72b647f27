"""The one loop that follows a run: read what was appended, fold it, hand it
out, stop when the follower's rule (`agentledger.events.following.Until`) holds or its
`stop` is set, else wait for the next append. `tail --follow`, `run` and
`run --attach`, `replay --rerun` and the web view's stream all follow a run
through it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentledger.events.fold import apply
from agentledger.events.following import Until, reached
from agentledger.events.state import RunState
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.reading.port import RunReader


@dataclass(frozen=True, slots=True)
class Followed:
    """One step of a follow: the events appended since the last step (none when the
    wait ended without any), the state they fold to (None: no run yet), and
    whether this is the last step (the rule holds, or the follower said stop)."""

    events: list[Envelope[Any]]
    state: RunState | None
    last: bool


def follow(
    reader: RunReader,
    run_id: str,
    *,
    after: RunState | None = None,
    until: Until,
    stop: threading.Event | None = None,
    wait_s: float = 1.0,
    gather_s: float = 0.0,
) -> Iterator[Followed]:
    """The run's events after `after` (a state the caller folded; None: from the
    start), a step per read. After a step with events, `gather_s` lets a few more
    steps gather before the next read (fewer wake-ups)."""
    state = after
    while True:
        events = reader.read(run_id, after_seq=state.seq if state else 0)
        for env in events:
            state = apply(state, env)
        last = reached(until, state) or (stop is not None and stop.is_set())
        yield Followed(events, state, last)
        if last:
            return
        if events and gather_s > 0 and stop is not None and stop.wait(gather_s):
            continue
        reader.wait(run_id, after_seq=state.seq if state else 0, timeout_s=wait_s)
