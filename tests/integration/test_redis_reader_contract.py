"""The run reader contract (`tests.contracts.run_reader`) on the Redis reader, on
a real redis-server with a key prefix of its own (two shards: the feeds merge)."""

from __future__ import annotations

import pytest
import redis

from agentledger.services.adapters.reading.redis_reader import RedisRunReader
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.keys import Keys
from tests.contracts.run_reader import RunReaderContract


class TestRedisRunReader(RunReaderContract):
    @pytest.fixture
    def shards(self, prefix: str) -> Keys:
        return Keys(prefix, 2)

    @pytest.fixture
    def store(self, client: redis.Redis, shards: Keys) -> RedisEventStore:
        return RedisEventStore(client, shards)

    @pytest.fixture
    def reader(self, client: redis.Redis, shards: Keys) -> RedisRunReader:
        return RedisRunReader(client, shards)
