"""Pages of the runs index for `agentledger runs` and the web view's list (through
the run reader): newest first, across the
shards' `runs` sorted sets (score: creation time in ms), filtered by creation
time, status and any other property of a run the caller tests, with a page token (`<ms>:<run id>`, the last run shown) that
continues exactly after it, ties in the same millisecond included."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.services.adapters.reading.port import Position, RunReader

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True, slots=True)
class Page:
    states: list[RunState]
    next_token: str | None  # None: nothing more


class BadPageToken(ValueError):
    """A page token that is not one `page_of_runs` gave."""


def page_of_runs(
    reader: RunReader,
    load: Callable[[Sequence[str]], Sequence[RunState | None]],
    *,
    statuses: frozenset[RunStatus],
    since: float | None,
    until: float | None,
    limit: int,
    token: str | None,
    keep: Callable[[RunState], bool] | None = None,
    most_scanned: int | None = None,
) -> Page:
    """Up to `limit` runs of `statuses` (any when empty) for which `keep` holds,
    newest first, and the token of the page after them. With `most_scanned`, a
    search stops after looking at that many runs: the page holds what it found so
    far, and its token goes on from the last run looked at (a rare match in a long
    index costs one bounded read a page, never the whole index at once)."""
    cursor = _token(token) if token else ((until * 1000) if until else math.inf, "")
    floor = since * 1000 if since else -math.inf
    batch_size = max(limit + 1, 50)
    found: list[tuple[Position, RunState]] = []
    scanned, exhausted = 0, False
    while len(found) <= limit and not exhausted:
        if most_scanned is not None and scanned >= most_scanned:
            return Page([s for _, s in found], _token_of(cursor))
        batch, exhausted = reader.runs_before(cursor, floor, batch_size)
        scanned += len(batch)
        for position, state in zip(batch, load([run for _, run in batch]), strict=True):
            cursor = position
            if state is not None and _wanted(state, statuses, keep):
                found.append((position, state))
                if len(found) > limit:
                    break
    more = len(found) > limit
    shown = found[:limit]
    return Page([s for _, s in shown], _token_of(shown[-1][0]) if more and shown else None)


def _token_of(position: Position) -> str:
    return f"{int(position[0])}:{position[1]}"


def _wanted(
    state: RunState, statuses: frozenset[RunStatus], keep: Callable[[RunState], bool] | None
) -> bool:
    if statuses and state.status not in statuses:
        return False
    return keep is None or keep(state)


def _token(text: str) -> Position:
    ms, _, run = text.partition(":")
    try:
        return float(int(ms)), run
    except ValueError:
        raise BadPageToken(
            f"{text!r} is not a page token (it looks like 1764583200123:r-…)"
        ) from None


def parse_time(text: str, *, now: float | None = None) -> float:
    """Seconds since the epoch from an ISO time (local time when it names no zone),
    seconds since the epoch, or an age such as 30m, 2h, 7d (that long ago)."""
    text = text.strip()
    if (age := _AGE.match(text)) is not None:
        return (time.time() if now is None else now) - float(age[1]) * _UNIT_S[age[2]]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(
            f"cannot read {text!r} as a time: give an ISO time (2026-12-01T10:00), "
            "seconds since the epoch, or an age such as 30m, 2h or 7d"
        ) from None
