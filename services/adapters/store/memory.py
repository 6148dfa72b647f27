"""The in-memory event store, for unit tests; it passes the same contract suite."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agentledger.events.types import CODEC
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.broker.outbox import command_key
from agentledger.services.adapters.store.overflow import DEFAULT_MAX_BYTES, Cutter, page_field
from agentledger.services.adapters.store.port import (
    Append,
    Exported,
    Head,
    Outgoing,
    Removed,
    RunIndexEntry,
    Snapshot,
    Tail,
)
from agentledger.services.errors import ConcurrencyConflict


class MemoryOutbox:
    """Messages queued by appends (and sent on their own), in the order they were
    queued: the in-memory stand-in of the task-queue streams for unit tests."""

    def __init__(self) -> None:
        self._queued: list[Outgoing] = []
        self._lock = threading.Lock()

    def put(self, m: Outgoing) -> None:
        with self._lock:
            self._queued.append(m)

    def resend(self, messages: Sequence[Outgoing]) -> list[Outgoing]:
        """The sweeper's re-drives: each queued unless a message for the same command
        still waits in its stream (as `resend.lua` does on Redis); those queued."""
        sent = []
        with self._lock:
            for m in messages:
                key = command_key(m.data)
                if key is None or not any(
                    q.stream == m.stream and command_key(q.data) == key for q in self._queued
                ):
                    self._queued.append(m)
                    sent.append(m)
        return sent

    def take(self) -> list[Outgoing]:
        """Every message queued so far, oldest first, and forget them."""
        with self._lock:
            out, self._queued = self._queued, []
            return out

    def peek(self, stream: str) -> list[bytes]:
        with self._lock:
            return [m.data for m in self._queued if m.stream == stream]


class MemoryEventStore:
    def __init__(
        self,
        outbox: MemoryOutbox | None = None,
        shard_of: Callable[[str], int] | None = None,
        *,
        event_max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.outbox = outbox or MemoryOutbox()  # where appended commands go
        self._shard_of = shard_of
        self._cutter = Cutter(event_max_bytes)
        self._logs: dict[str, list[Envelope[Any]]] = {}
        self._overflow: dict[str, dict[str, bytes]] = {}
        self._live: dict[str, float] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._feed: list[tuple[str, int, int]] = []  # (run, first seq, last seq) per append
        self._lock = threading.RLock()
        self._appended = threading.Condition(self._lock)  # the read side's waits

    def append(
        self,
        run_id: str,
        events: Sequence[Envelope[Any]],
        *,
        expected_seq: int,
        live: bool,
        messages: Sequence[Outgoing] = (),
        expected_id: str = "",
        snapshot: Snapshot | None = None,
    ) -> int:
        if not events:
            raise ValueError("nothing to append")
        events, pages = self._cutter.for_append(events)
        with self._lock:
            log = self._logs.setdefault(run_id, [])
            if len(log) != expected_seq:
                self._cutter.appended()
                if len(log) > expected_seq and log[expected_seq].id == events[0].id:
                    return expected_seq + len(events)  # a resend of an append that landed
                raise ConcurrencyConflict(run_id, expected_seq, len(log))
            if expected_id and expected_seq and log[expected_seq - 1].id != expected_id:
                self._cutter.appended()
                raise ConcurrencyConflict(run_id, expected_seq, len(log))
            self._cutter.appended()
            log.extend(events)
            if pages:
                self._overflow.setdefault(run_id, {}).update(pages)
            if live:
                self._live[run_id] = events[-1].at
            else:
                self._live.pop(run_id, None)
            for m in messages:
                self.outbox.put(m)
            if snapshot is not None:
                self._keep_snapshot(run_id, snapshot)
            self._feed.append((run_id, expected_seq + 1, len(log)))
            self._appended.notify_all()
            return len(log)

    def append_many(self, appends: Sequence[Append]) -> list[int | Exception]:
        out: list[int | Exception] = []
        for a in appends:
            try:
                out.append(
                    self.append(
                        a.run_id,
                        a.events,
                        expected_seq=a.expected_seq,
                        live=a.live,
                        messages=a.messages,
                        expected_id=a.expected_id,
                        snapshot=a.snapshot,
                    )  # fmt: skip
                )
            except (ConcurrencyConflict, InvalidEvent) as exc:
                out.append(exc)
        return out

    def as_stored(self, run_id: str, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        return self._cutter.as_stored(events)  # a field past the cap cut

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        with self._lock:
            return list(self._logs.get(run_id, [])[after_seq:])

    def feed(self, after: int = 0) -> list[tuple[str, int, int]]:
        """(run, first seq, last seq) of each append after the first `after`, in order:
        the one feed of this store (the memory read side's)."""
        with self._lock:
            return self._feed[after:]

    def wait_for(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `done()` holds, checked at each append, or `timeout_s` passed."""
        with self._appended:
            return self._appended.wait_for(done, timeout_s)

    def overflow_pages(self, run_id: str, ref: str, first: int, count: int) -> list[str]:
        with self._lock:
            kept = self._overflow.get(run_id, {})
            fields = [page_field(ref, n) for n in range(first, first + count)]
            if any(f not in kept for f in fields):
                raise InvalidEvent(
                    f"run {run_id!r} lacks overflow pages of {ref!r}", field="overflow"
                )
            return [kept[f].decode() for f in fields]

    def read_tails(self, heads: Sequence[Head], *, snapshot_version: str) -> list[Tail]:
        with self._lock:
            return [self._tail(head, snapshot_version) for head in heads]

    def _tail(self, head: Head, version: str) -> Tail:
        log = self._logs.get(head.run_id, [])

        def holds(seq: int, event_id: str) -> bool:
            return 0 < seq <= len(log) and log[seq - 1].id == event_id

        snap = self._snapshots.get(head.run_id)
        snap = snap if snap is not None and snap.version == version else None
        usable = snap if snap is not None and holds(snap.seq, snap.event_id) else None
        snap_seq = snap.seq if snap else 0
        if usable is not None and usable.seq > head.seq:
            return Tail(usable.seq, log[usable.seq :], usable, snap_seq)
        if holds(head.seq, head.event_id):
            return Tail(head.seq, log[head.seq :], None, snap_seq)
        if usable is not None:  # the head is not in this log; the snapshot still is
            return Tail(usable.seq, log[usable.seq :], usable, snap_seq)
        return Tail(0, list(log), None, snap_seq)

    def save_snapshot(self, run_id: str, snapshot: Snapshot) -> None:
        with self._lock:
            self._keep_snapshot(run_id, snapshot)

    def _keep_snapshot(self, run_id: str, snapshot: Snapshot) -> None:
        """As save_snapshot, the lock held."""
        kept = self._snapshots.get(run_id)
        same = kept is not None and kept.version == snapshot.version
        pages = {**(kept.pages if kept and same else {})}
        for n, blob in snapshot.pages.items():
            pages.setdefault(n, blob)
        spec = kept.spec if kept and same and kept.spec else snapshot.spec
        head = snapshot if not same or kept is None or kept.seq < snapshot.seq else kept
        self._snapshots[run_id] = replace(head, spec=spec, pages=pages)

    def snapshot_pages(self, run_id: str, count: int) -> list[bytes]:
        with self._lock:
            kept = self._snapshots.get(run_id)
            pages = kept.pages if kept else {}
            if any(n not in pages for n in range(count)):
                raise InvalidEvent(f"snapshot of {run_id!r} lacks pages", field="snapshot")
            return [pages[n] for n in range(count)]

    def runs(self, *, limit: int = 50) -> list[RunIndexEntry]:
        with self._lock:
            entries = [RunIndexEntry(r, log[0].at) for r, log in self._logs.items() if log]
        return sorted(entries, key=lambda e: e.created_at, reverse=True)[:limit]

    def idle_live_runs(
        self, *, idle_since: float, shards: Sequence[int] | None = None, limit: int = 100
    ) -> list[str]:
        with self._lock:
            idle = sorted((at, r) for r, at in self._live.items() if at <= idle_since)
        if shards is not None and self._shard_of is not None:
            idle = [(at, r) for at, r in idle if self._shard_of(r) in shards]
        return [r for _, r in idle[:limit]]

    def touch(self, run_id: str, *, at: float, seq: int | None = None) -> None:
        with self._lock:
            moved = seq is not None and len(self._logs.get(run_id, ())) != seq
            if run_id in self._live and not moved:
                self._live[run_id] = at

    def export(self, run_id: str) -> Exported | None:
        with self._lock:
            log = list(self._logs.get(run_id, []))
            pages = dict(self._overflow.get(run_id, {}))
        if not log:
            return None
        return Exported(run_id, [CODEC.encode(env) for env in log], pages)

    def remove(self, run_id: str, *, count: int, last_id: str) -> Removed:
        with self._lock:
            log = self._logs.get(run_id, [])
            if not log:
                self._logs.pop(run_id, None)
                return Removed.GONE
            if len(log) != count or log[-1].id != last_id or run_id in self._live:
                return Removed.CHANGED
            for kept in (self._logs, self._overflow, self._snapshots):
                kept.pop(run_id, None)
            return Removed.REMOVED

    def created_before(
        self,
        before: float,
        *,
        shards: Sequence[int] | None = None,
        offset: int = 0,
        limit: int = 1000,
    ) -> list[RunIndexEntry]:
        found = [
            e
            for e in self.runs(limit=sys.maxsize)
            if int(e.created_at * 1000) < int(before * 1000)
            and (shards is None or self._shard_of is None or self._shard_of(e.run_id) in shards)
        ]
        ordered = sorted(found, key=lambda e: (int(e.created_at * 1000), e.run_id))
        return ordered[offset : offset + limit]

    def trim_feeds(self, before: float) -> None:
        """Nothing: this store's one feed is its reader's cursor space (positions), kept
        whole; an entry of a removed run reads as no events."""
