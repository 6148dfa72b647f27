"""The archive behind the read side, in one place: a run Redis no longer holds is
read from the archive (`agentledger.services.adapters.archive`), so every command
that reads — status, tail --run, replay, context, trace, raw, the web view —
reads an archived run as it read it before, and the runs list pages over the
archive's catalogue beside Redis's index. `ArchivedReader` wraps the run
reader, `ArchivedStore` the store's reads (the states commands fold, the
overflow pages they show); both ask the archive only when Redis has no log of
the run, and writes go to Redis untouched."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from agentledger.events.types import RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.archive.archive import Archive
from agentledger.services.adapters.archive.segment import SegmentError
from agentledger.services.adapters.reading.port import Cursors, Position, RawEntry, RunReader
from agentledger.services.adapters.store.overflow import page_field
from agentledger.services.adapters.store.port import EventStore, Head, Snapshot, Tail


def _archived(archive: Archive, run_id: str) -> list[Envelope[Any]]:
    """The archived run's events ([] when it is not archived); a damaged segment is an
    InvalidEvent naming it, as a damaged entry in Redis is."""
    try:
        found = archive.events(run_id)
    except SegmentError as exc:
        raise InvalidEvent(f"archived run {run_id!r}: {exc}", field="archive") from None
    return found[1] if found is not None else []


def archived_tenant(archive: Archive | None, run_id: str) -> str | None:
    """The tenant of an archived run (None: not archived, or no archive): whose run a
    replay model may play."""
    envs = _archived(archive, run_id) if archive is not None else []
    created = envs[0].data if envs else None
    return created.spec.principal.tenant if isinstance(created, RunCreated) else None


class ArchivedReader:
    def __init__(self, inner: RunReader, archive: Archive) -> None:
        self._inner = inner
        self._archive = archive

    def exists(self, run_id: str) -> bool:
        return self._inner.exists(run_id) or bool(_archived(self._archive, run_id))

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        found = self._inner.read(run_id, after_seq=after_seq)
        if found or (after_seq > 0 and self._inner.exists(run_id)):
            return found
        return _archived(self._archive, run_id)[after_seq:]

    def raw(self, run_id: str) -> list[RawEntry]:
        found = self._inner.raw(run_id)
        if found:
            return found
        return [RawEntry(f"0-{e.seq}", e) for e in _archived(self._archive, run_id)]

    def runs_before(self, cursor: Position, floor_ms: float, n: int) -> tuple[list[Position], bool]:
        """Redis's runs and the archive's catalogue, merged newest first (a run in
        both, archived but not yet removed, once)."""
        live, live_done = self._inner.runs_before(cursor, floor_ms, n)
        kept, kept_done = self._archive.runs_before(cursor, floor_ms, n)
        seen = {run for _, run in live}
        merged = sorted([*live, *(p for p in kept if p[1] not in seen)], reverse=True)
        return merged[:n], live_done and kept_done and len(merged) <= n

    def wait(self, run_id: str, *, after_seq: int, timeout_s: float) -> bool:
        if not self._inner.exists(run_id) and _archived(self._archive, run_id):
            time.sleep(timeout_s)  # archived: over, nothing more comes (a follower waits on)
            return False
        return self._inner.wait(run_id, after_seq=after_seq, timeout_s=timeout_s)

    def feed_ends(self) -> Cursors:
        return self._inner.feed_ends()

    def feed_history(self) -> tuple[list[Envelope[Any]], Cursors]:
        return self._inner.feed_history()

    def feed_next(self, cursors: Cursors, *, timeout_s: float) -> list[Envelope[Any]]:
        return self._inner.feed_next(cursors, timeout_s=timeout_s)

    def feeds_moved(self, cursors: Cursors, *, timeout_s: float) -> bool:
        return self._inner.feeds_moved(cursors, timeout_s=timeout_s)


class ArchivedStore:
    """The store, with the archive behind its reads; everything else is the store's."""

    def __init__(self, inner: EventStore, archive: Archive) -> None:
        self._inner = inner
        self._archive = archive

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        found = self._inner.read(run_id, after_seq=after_seq)
        if found or (after_seq > 0 and self._inner.read(run_id, after_seq=after_seq - 1)):
            return found
        return _archived(self._archive, run_id)[after_seq:]

    def read_tails(self, heads: Sequence[Head], *, snapshot_version: str) -> list[Tail]:
        tails = self._inner.read_tails(heads, snapshot_version=snapshot_version)
        return [
            self._from_archive(head, tail) if tail.base == 0 and not tail.events else tail
            for head, tail in zip(heads, tails, strict=True)
        ]

    def _from_archive(self, head: Head, tail: Tail) -> Tail:
        """No log in Redis: the archived log, after the head when it holds the head's event."""
        envs = _archived(self._archive, head.run_id)
        if 0 < head.seq <= len(envs) and envs[head.seq - 1].id == head.event_id:
            return Tail(head.seq, envs[head.seq :], None, 0)
        return Tail(0, envs, None, 0) if envs else tail

    def overflow_pages(self, run_id: str, ref: str, first: int, count: int) -> list[str]:
        try:
            return self._inner.overflow_pages(run_id, ref, first, count)
        except InvalidEvent:
            found = self._archive.events(run_id)
            if found is None:
                raise
            pages = found[0].overflow
            fields = [page_field(ref, n) for n in range(first, first + count)]
            if any(f not in pages for f in fields):
                raise
            return [pages[f].decode() for f in fields]

    def save_snapshot(self, run_id: str, snapshot: Snapshot) -> None:
        """Kept only for a log Redis holds: a reader folding an archived run must not
        leave its snapshot behind in Redis."""
        if self._inner.read(run_id, after_seq=max(0, snapshot.seq - 1))[:1]:
            self._inner.save_snapshot(run_id, snapshot)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # writes, indexes: the store's own
