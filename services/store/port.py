"""The event store port: append at an expected seq, read after a seq.

Appends are idempotent on the first event's id: a resent append whose reply
was lost returns the same result instead of writing twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from schemas.envelope import Envelope


@dataclass(frozen=True, slots=True)
class RunIndexEntry:
    run_id: str
    created_at: float


class EventStore(Protocol):
    def append(
        self, run_id: str, events: Sequence[Envelope[Any]], *, expected_seq: int, live: bool
    ) -> int:
        """Append after `expected_seq`; return the new seq or raise ConcurrencyConflict.

        `live` says whether the run is live after these events (the sweeper's index)."""
        ...

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]: ...

    def runs(self, *, limit: int = 50) -> list[RunIndexEntry]:
        """The newest runs first."""
        ...

    def idle_live_runs(self, *, idle_since: float, limit: int = 100) -> list[str]:
        """Live runs whose last progress is older than `idle_since`."""
        ...

    def touch(self, run_id: str, *, at: float) -> None:
        """Mark a live run as looked at, so the sweeper waits a lease before the next look."""
        ...
