"""The run reader port: a run's events, its raw entries (each decoded by the
store's one decoder, or the reason it does not decode), a wait for the run's
next append, and the feeds — every append of every run, in append order per
feed — read from their ends, their starts, or after cursors the reader hands
out (opaque to callers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent

Cursors = dict[str, str]  # per feed, the last entry read (the reader's own names and ids)
Position = tuple[float, str]  # a run in the runs index: (created ms, run id), ordered by both


@dataclass(frozen=True, slots=True)
class RawEntry:
    """One entry of a run's stream as stored: its id and its envelope, or why it
    does not decode (`broken`)."""

    entry_id: str
    envelope: Envelope[Any] | None
    broken: InvalidEvent | None = None


class RunReader(Protocol):
    def exists(self, run_id: str) -> bool:
        """Whether the run has a log."""
        ...

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        """The run's events after `after_seq`, in order."""
        ...

    def raw(self, run_id: str) -> list[RawEntry]:
        """Every entry of the run's stream, in stream order, decoded one by one."""
        ...

    def runs_before(self, cursor: Position, floor_ms: float, n: int) -> tuple[list[Position], bool]:
        """Up to `n` runs of the runs index before `cursor` and created at or after
        `floor_ms`, newest first, and whether none are left beyond them."""
        ...

    def wait(self, run_id: str, *, after_seq: int, timeout_s: float) -> bool:
        """Block until the run's log holds an event after `after_seq` (True) or
        `timeout_s` passed (False)."""
        ...

    def feed_ends(self) -> Cursors:
        """Cursors at the feeds' ends: what follows them is what is appended next."""
        ...

    def feed_history(self) -> tuple[list[Envelope[Any]], Cursors]:
        """Every event the feeds hold, merged by event time, and cursors at their ends."""
        ...

    def feed_next(self, cursors: Cursors, *, timeout_s: float) -> list[Envelope[Any]]:
        """The events appended after `cursors` (waiting up to `timeout_s` for one),
        merged by event time; `cursors` move past them."""
        ...

    def feeds_moved(self, cursors: Cursors, *, timeout_s: float) -> bool:
        """Whether anything was appended after `cursors` (waiting up to `timeout_s`);
        `cursors` move past it. Cheaper than `feed_next`: no event is read."""
        ...
