"""The run reader on Redis: a run's stream (entry ids `0-<seq>`), read by XRANGE
and waited on by XREAD; the shard feeds (one entry per append: the run and its
seqs), whose events are read from the runs' streams in one round trip. Every
entry is decoded by the store's one decoder (`store.entries`)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import Any

import redis

from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.reading.port import Cursors, Position, RawEntry
from agentledger.services.adapters.redis.slot_reads import read_each
from agentledger.services.adapters.store.entries import decode_entry
from agentledger.services.keys import Keys

BATCH = 500  # feed entries read at once


class RedisRunReader:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._r = client
        self._keys = keys

    def exists(self, run_id: str) -> bool:
        return bool(self._r.exists(self._keys.run(run_id)))

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        entries: Any = self._r.xrange(self._keys.run(run_id), f"0-{after_seq + 1}", "+")
        return [decode_entry(entry_id, fields) for entry_id, fields in entries]

    def raw(self, run_id: str) -> list[RawEntry]:
        entries: Any = self._r.xrange(self._keys.run(run_id))
        return [_raw(entry_id, fields) for entry_id, fields in entries]

    def runs_before(self, cursor: Position, floor_ms: float, n: int) -> tuple[list[Position], bool]:
        top = "+inf" if cursor[0] == math.inf else str(cursor[0])
        bottom = "-inf" if floor_ms == -math.inf else str(floor_ms)
        pipe = self._r.pipeline(transaction=False)
        for shard in range(self._keys.shards):
            pipe.zrevrangebyscore(
                self._keys.runs(shard), top, bottom, start=0, num=n, withscores=True
            )
        replies = pipe.execute()
        rows = [(float(score), run.decode()) for reply in replies for run, score in reply]
        older = sorted((r for r in rows if r < cursor), reverse=True)
        exhausted = all(len(reply) < n for reply in replies)
        return older[:n], exhausted and len(older) <= n

    def wait(self, run_id: str, *, after_seq: int, timeout_s: float) -> bool:
        key = self._keys.run(run_id)
        return bool(self._r.xread({key: f"0-{after_seq}"}, count=1, block=_ms(timeout_s)))

    def feed_ends(self) -> Cursors:
        feeds = self._feeds()
        pipe = self._r.pipeline(transaction=False)
        for feed in feeds:
            pipe.xrevrange(feed, count=1)
        ends = pipe.execute()
        return {
            f: (last[0][0].decode() if last else "0-0") for f, last in zip(feeds, ends, strict=True)
        }

    def feed_history(self) -> tuple[list[Envelope[Any]], Cursors]:
        per_feed: list[list[Envelope[Any]]] = []
        cursors: Cursors = {}
        for feed in self._feeds():
            entries: Any = self._r.xrange(feed)
            cursors[feed] = entries[-1][0].decode() if entries else "0-0"
            per_feed.append(self._envelopes(_ref(f) for _, f in entries))
        return list(heapq.merge(*per_feed, key=lambda e: e.at)), cursors

    def feed_next(self, cursors: Cursors, *, timeout_s: float) -> list[Envelope[Any]]:
        reply = read_each(self._r, cursors, count=BATCH, block_ms=_ms(timeout_s))
        batches: list[list[Envelope[Any]]] = []
        for stream, entries in reply or []:
            cursors[stream.decode()] = entries[-1][0].decode()
            batches.append(self._envelopes(_ref(f) for _, f in entries))
        return list(heapq.merge(*batches, key=lambda e: e.at))

    def feeds_moved(self, cursors: Cursors, *, timeout_s: float) -> bool:
        reply = read_each(self._r, cursors, count=BATCH, block_ms=_ms(timeout_s))
        for stream, entries in reply or []:
            cursors[stream.decode()] = entries[-1][0].decode()
        return bool(reply)

    def _feeds(self) -> list[str]:
        return [self._keys.feed(shard) for shard in range(self._keys.shards)]

    def _envelopes(self, refs: Iterable[tuple[str, int, int]]) -> list[Envelope[Any]]:
        """The events feed entries point at, in the feed's order (one round trip)."""
        refs = list(refs)
        if not refs:
            return []
        pipe = self._r.pipeline(transaction=False)
        for run, first, last in refs:
            pipe.xrange(self._keys.run(run), f"0-{first}", f"0-{last}")
        # none for a run whose log was deleted since
        return [
            decode_entry(entry_id, fields)
            for entries in pipe.execute()
            for entry_id, fields in entries
        ]


def _ref(fields: dict[bytes, bytes]) -> tuple[str, int, int]:
    """(run, first seq, last seq) of the append a feed entry stands for."""
    last = int(fields[b"seq"])
    return fields[b"run"].decode(), int(fields.get(b"first", last)), last


def _raw(entry_id: bytes, fields: dict[bytes, bytes]) -> RawEntry:
    try:
        return RawEntry(entry_id.decode(), decode_entry(entry_id, fields))
    except InvalidEvent as exc:
        return RawEntry(entry_id.decode(), None, exc)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
