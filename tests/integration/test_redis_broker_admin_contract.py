"""The broker admin contract (`tests.contracts.broker_admin`) on the Redis
admin, on a real redis-server with a key prefix of its own; the pools' side is
played with the pools' own parts (the directory, membership heartbeats, the
queue streams and their dead letters)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.broker.redis_admin import RedisBrokerAdmin
from agentledger.services.adapters.broker.streams_queue import GROUP, StreamQueue
from agentledger.services.adapters.redis.directory import Directory, group
from agentledger.services.keys import Keys
from tests.contracts.broker_admin import BrokerAdminContract

TTL_S = 60.0


class _Pools:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r, self.keys = client, keys

    def _queue(self, queue: str, toolset: str, pool: str, shard: int) -> StreamQueue:
        q = StreamQueue(
            self.r,
            self.keys.queue(shard, queue, toolset, pool),
            claim_idle_ms=60_000,
            max_deliveries=3,
        )
        q.ensure_group()
        return q

    def serve(
        self, worker: str, queue: str, toolset: str, pools: list[str], modules: list[str]
    ) -> None:
        Directory(self.r, self.keys, member_ttl_s=TTL_S).register(
            queue, toolset, {"modules": sorted(modules)}
        )
        for pool in pools:
            Membership(
                self.r, self.keys.members(group(queue, toolset, pool)), worker, ttl_s=TTL_S
            ).beat()

    def hold(self, worker: str, queue: str, toolset: str, pool: str, count: int) -> None:
        q = self._queue(queue, toolset, pool, 0)
        for n in range(count):
            q.push(f"held {n}".encode())
        self.r.xreadgroup(GROUP, worker, {q.stream: ">"}, count=count)

    def kill(
        self, stream: tuple[str, str, str, int], data: bytes, *, reason: str, deliveries: int
    ) -> str:
        q = self._queue(*stream)
        q.push(data)
        reply: Any = self.r.xreadgroup(GROUP, "w1", {q.stream: ">"}, count=1)
        entry = reply[0][1][0][0].decode()
        q.dead_letter(entry, data, reason=reason, deliveries=deliveries)
        return str(self.r.xrange(q.dead)[-1][0].decode())  # type: ignore[index]

    def queued(self, stream: tuple[str, str, str, int]) -> list[bytes]:
        entries: Any = self.r.xrange(self.keys.queue(stream[3], *stream[:3]))
        return [fields[b"m"] for _, fields in entries]


class TestRedisBrokerAdmin(BrokerAdminContract):
    @pytest.fixture
    def admin(self, client: redis.Redis, keys: Keys) -> RedisBrokerAdmin:
        return RedisBrokerAdmin(client, keys, member_ttl_s=TTL_S)

    @pytest.fixture
    def pools(self, client: redis.Redis, keys: Keys) -> _Pools:
        return _Pools(client, keys)
