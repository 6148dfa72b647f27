"""The run reader over the in-memory event store, for unit tests: the store's
logs, its one feed (an entry per append) and its append signal for the waits.
It passes the same contract suite as the Redis reader."""

from __future__ import annotations

import sys
from typing import Any

from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.reading.port import Cursors, Position, RawEntry
from agentledger.services.adapters.store.memory import MemoryEventStore

FEED = "feed"  # the memory store's one feed; a cursor is how many of its entries were read


class MemoryRunReader:
    def __init__(self, store: MemoryEventStore) -> None:
        self._store = store

    def exists(self, run_id: str) -> bool:
        return bool(self._store.read(run_id))

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        return self._store.read(run_id, after_seq=after_seq)

    def raw(self, run_id: str) -> list[RawEntry]:
        return [RawEntry(f"0-{env.seq}", env) for env in self._store.read(run_id)]

    def runs_before(self, cursor: Position, floor_ms: float, n: int) -> tuple[list[Position], bool]:
        rows = [
            (float(int(e.created_at * 1000)), e.run_id) for e in self._store.runs(limit=sys.maxsize)
        ]
        older = sorted((r for r in rows if r < cursor and r[0] >= floor_ms), reverse=True)
        return older[:n], len(older) <= n

    def wait(self, run_id: str, *, after_seq: int, timeout_s: float) -> bool:
        return self._store.wait_for(
            lambda: bool(self._store.read(run_id, after_seq=after_seq)), timeout_s
        )

    def feed_ends(self) -> Cursors:
        return {FEED: str(len(self._store.feed()))}

    def feed_history(self) -> tuple[list[Envelope[Any]], Cursors]:
        cursors: Cursors = {FEED: "0"}
        return self._take(cursors), cursors

    def feed_next(self, cursors: Cursors, *, timeout_s: float) -> list[Envelope[Any]]:
        self._wait_past(cursors, timeout_s)
        return self._take(cursors)

    def feeds_moved(self, cursors: Cursors, *, timeout_s: float) -> bool:
        moved = self._wait_past(cursors, timeout_s)
        cursors[FEED] = str(len(self._store.feed()))
        return moved

    def _wait_past(self, cursors: Cursors, timeout_s: float) -> bool:
        seen = int(cursors[FEED])
        return self._store.wait_for(lambda: len(self._store.feed()) > seen, timeout_s)

    def _take(self, cursors: Cursors) -> list[Envelope[Any]]:
        """The events of the feed entries after the cursor, in append order (one feed:
        merged already); the cursor moves."""
        entries = self._store.feed(int(cursors[FEED]))
        cursors[FEED] = str(int(cursors[FEED]) + len(entries))
        return [
            env
            for run, first, last in entries
            for env in self._store.read(run, after_seq=first - 1)[: last - first + 1]
        ]
