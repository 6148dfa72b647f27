"""The event store contract (`tests.contracts.event_store`) on the Redis adapter,
on a real redis-server; the in-memory adapter passes the same suite in the unit
tier (`tests/unit/test_memory_store_contract.py`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.keys import Keys
from tests.contracts.event_store import EventStoreContract


class TestRedisEventStore(EventStoreContract):
    @pytest.fixture
    def store(self, client: redis.Redis, keys: Keys) -> RedisEventStore:
        return RedisEventStore(client, keys)

    @pytest.fixture
    def queued(self, client: redis.Redis) -> Callable[[str], list[bytes]]:
        def on_stream(stream: str) -> list[bytes]:
            entries: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(stream)  # type: ignore[assignment]
            return [fields[b"m"] for _, fields in entries]

        return on_stream

    @pytest.fixture
    def stream(self, keys: Keys) -> str:
        return keys.queue(keys.shard("run-a"), "default", "fp", "model")


class TestRedisEventStoreWithoutScripts(TestRedisEventStore):
    """The same contract with the tails read by plain reads (`plain_tails`), as the
    store reads them for a Redis user refused scripts (ops)."""

    @pytest.fixture
    def store(self, client: redis.Redis, keys: Keys) -> RedisEventStore:
        store = RedisEventStore(client, keys)
        store._scripted_reads = False
        return store
