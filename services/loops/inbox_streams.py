"""The inbox streams an intake reads: for each partition it owns, the stream of
each publisher it reads (`Keys.inbox(partition, publisher)`), its consumer group
made the first time the stream is read (a publisher added to the file, a
partition taken over). One XREADGROUP over them all on one Redis; on a cluster
one per partition (all streams of a partition share its hash tag: one slot),
each on its own connection (`SlotReads`). Replies come back as (partition,
publisher, entries)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import redis

from agentledger.services.adapters.redis.slot_reads import SlotReads
from agentledger.services.keys import Keys

Entries = list[tuple[bytes, dict[bytes, bytes]]]
CLAIM_COUNT = 50


class InboxStreams:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        group: str,
        consumer: str,
        slot_reads: SlotReads | None,
    ):
        self._r = client
        self._keys = keys
        self._group = group
        self._consumer = consumer
        self._slot_reads = slot_reads
        self._grouped: set[str] = set()  # streams whose group is known to exist

    def read(
        self, parts: Sequence[int], publishers: Sequence[str], *, count: int, block_ms: int
    ) -> list[tuple[int, str, Entries]]:
        """New entries of these partitions' streams of these publishers (blocking up to
        `block_ms`; 0: not at all)."""
        by_part = [tuple(self._keys.inbox(p, name) for name in publishers) for p in parts]
        self._ensure_groups([s for streams in by_part for s in streams])
        try:
            if self._slot_reads is not None:
                reply: Any = self._slot_reads.read(by_part, count=count, block_ms=block_ms)
            else:
                wanted: Any = {s: ">" for streams in by_part for s in streams}
                block = block_ms if block_ms > 0 else None  # BLOCK 0 would wait for ever
                reply = self._r.xreadgroup(
                    self._group, self._consumer, wanted, count=count, block=block
                )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._grouped.clear()  # a stream deleted under us: its group is made again
            return []
        return self._named(reply or [])

    def claim(
        self, parts: Sequence[int], publishers: Sequence[str], *, min_idle_ms: int
    ) -> list[tuple[int, str, Entries]]:
        """Entries delivered to an intake that never acknowledged them, taken over."""
        streams = [self._keys.inbox(p, name) for p in parts for name in publishers]
        self._ensure_groups(streams)
        with self._r.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xautoclaim(
                    stream, self._group, self._consumer, min_idle_ms, "0-0", count=CLAIM_COUNT
                )
            replies = pipe.execute(raise_on_error=False)
        found: list[tuple[Any, Any]] = []
        for stream, reply in zip(streams, replies, strict=True):
            if isinstance(reply, redis.ResponseError) and "NOGROUP" in str(reply):
                self._grouped.discard(stream)  # made again at the next read
            elif isinstance(reply, Exception):
                raise reply
            elif reply and len(reply) > 1 and reply[1]:
                found.append((stream, reply[1]))
        return self._named(found)

    def close(self) -> None:
        if self._slot_reads is not None:
            self._slot_reads.close()

    def _named(self, reply: Iterable[tuple[Any, Any]]) -> list[tuple[int, str, Entries]]:
        out = []
        for stream, entries in reply:
            name = stream.decode() if isinstance(stream, bytes) else str(stream)
            where = self._keys.inbox_publisher(name)
            if where is not None:
                out.append((where[0], where[1], cast(Entries, entries)))
        return out

    def _ensure_groups(self, streams: Iterable[str]) -> None:
        new = [s for s in streams if s not in self._grouped]
        if not new:
            return
        with self._r.pipeline(transaction=False) as pipe:
            for stream in new:
                pipe.xgroup_create(stream, self._group, id="0", mkstream=True)
            replies = pipe.execute(raise_on_error=False)
        for stream, reply in zip(new, replies, strict=True):
            if isinstance(reply, Exception) and "BUSYGROUP" not in str(reply):
                raise reply
            self._grouped.add(stream)
