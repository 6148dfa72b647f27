"""Reading many streams of a Redis Cluster without a command over several slots.

`SlotReads` keeps one blocking XREADGROUP out per stream (or per group of
streams in one slot: the inbox streams of one partition), each on its own
connection to the master that holds it, and waits for the first
replies of all of them together (select): a message on any stream wakes the
reader at once, with no polling and one thread. A read still out when the
caller returns stays out for the next call (its entries are delivered to us
either way). After a failover a read may answer MOVED: the slots are learnt
again and the stream is read from its new master on the next call.

`read_each` is the plain XREAD of the CLI's `tail --follow`: one non-blocking
read per stream, pipelined by node, then a short pause when nothing came."""

from __future__ import annotations

import select
import time
from collections.abc import Iterable
from typing import Any

import redis
from redis.connection import ConnectionPool
from redis.exceptions import AskError, MovedError, TryAgainError

from agentledger.services.adapters.redis.client import is_cluster, refresh

Batch = list[tuple[bytes, list[Any]]]  # (stream, [(entry id, fields)]) as XREAD(GROUP) replies
_REROUTE = (MovedError, AskError, TryAgainError)


class SlotReads:
    def __init__(self, client: redis.Redis, group: str, consumer: str):
        self._client: Any = client
        self._group = group
        self._consumer = consumer
        # streams read together (one slot) -> (pool, connection)
        self._out: dict[tuple[str, ...], tuple[ConnectionPool, Any]] = {}

    def read(self, streams: Iterable[str | tuple[str, ...]], *, count: int, block_ms: int) -> Batch:
        """New entries of these streams; a tuple is streams of one slot, read by one command."""
        try:
            for item in streams:
                together = (item,) if isinstance(item, str) else item
                if together and together not in self._out:
                    self._send(together, count, block_ms)
            return self._collect(block_ms)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            self.close()
            refresh(self._client)
            raise redis.ConnectionError(f"a stream read failed: {exc}") from None

    def _send(self, streams: tuple[str, ...], count: int, block_ms: int) -> None:
        node = self._client.get_node_from_key(streams[0])
        pool = node.redis_connection.connection_pool
        conn = pool.get_connection()
        self._out[streams] = (pool, conn)  # first: close() gives it back if the send fails
        conn.send_command(
            "XREADGROUP", "GROUP", self._group, self._consumer,
            "COUNT", max(1, count), "BLOCK", max(1, block_ms),
            "STREAMS", *streams, *[">"] * len(streams),
        )  # fmt: skip

    def _collect(self, block_ms: int) -> Batch:
        by_sock = {conn._sock: stream for stream, (_, conn) in self._out.items()}
        if not by_sock:
            time.sleep(block_ms / 1000)
            return []
        readable, _, _ = select.select(list(by_sock), [], [], block_ms / 1000)
        batch: Batch = []
        for sock in readable:
            stream = by_sock[sock]
            pool, conn = self._out.pop(stream)
            try:
                reply = conn.read_response()
            except _REROUTE:
                pool.release(conn)
                refresh(self._client)
                continue
            except redis.ResponseError:
                pool.release(conn)
                raise
            except BaseException:
                conn.disconnect()
                pool.release(conn)
                raise
            pool.release(conn)
            batch += _parsed(reply)
        return batch

    def close(self) -> None:
        """Drop the reads still out (what they were delivered goes idle and is taken over)."""
        out, self._out = self._out, {}
        for pool, conn in out.values():
            conn.disconnect()
            pool.release(conn)


def _parsed(reply: Any) -> Batch:
    """A raw XREADGROUP reply (a map in RESP3, pairs in RESP2) as redis-py's
    parsed one: fields as dicts."""
    pairs = reply.items() if isinstance(reply, dict) else reply or []
    return [(stream, [(eid, _fields(flat)) for eid, flat in entries]) for stream, entries in pairs]


def _fields(flat: Any) -> dict[bytes, bytes]:
    if flat is None or isinstance(flat, dict):
        return flat or {}
    return dict(zip(flat[::2], flat[1::2], strict=True))


def read_each(client: redis.Redis, cursors: dict[str, str], *, count: int, block_ms: int) -> Batch:
    """XREAD of several streams after their cursors: one command on a plain Redis
    (blocking up to block_ms); on a cluster one per stream (each in one slot),
    pipelined, pausing up to block_ms (at most 0.2 s) when all were empty."""
    if not is_cluster(client):
        reply: Any = client.xread(cursors, count=count, block=block_ms)  # type: ignore[arg-type]
        return list(reply or [])
    streams = list(cursors)
    with client.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xread({stream: cursors[stream]}, count=count)
        replies = pipe.execute()
    batch: Batch = [item for reply in replies for item in reply or []]
    if not batch:
        time.sleep(min(block_ms, 200) / 1000)
    return batch
