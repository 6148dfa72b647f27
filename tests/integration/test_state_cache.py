"""Loading a run's state as snapshot + tail over the Redis store: the suite every
store passes (`tests.contracts.state_cache`; the in-memory store passes it in the
unit tier), and what only a real Redis can show: a log deleted and made again."""

from __future__ import annotations

import uuid

import pytest
import redis

from agentledger.events.fold import fold
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.handlers.state_cache import SNAPSHOT_EVERY, StateCache
from agentledger.services.keys import Keys
from tests.contracts.state_cache import StateCacheSuite, grow


class TestStateCacheOnRedis(StateCacheSuite):
    @pytest.fixture
    def store(self, client: redis.Redis, keys: Keys) -> RedisEventStore:
        return RedisEventStore(client, keys)


def test_a_log_deleted_and_made_again_is_folded_afresh(client: redis.Redis, keys: Keys) -> None:
    store = RedisEventStore(client, keys)
    cache = StateCache(store)
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    grow(store, run_id, SNAPSHOT_EVERY + 10)
    cache.load(run_id)  # cached at 60, snapshot at 60

    client.delete(keys.run(run_id))
    grow(store, run_id, SNAPSHOT_EVERY + 15)  # same run id, other events, a longer log
    again = cache.load(run_id)
    from_a_fresh_process = StateCache(store).load(run_id)

    assert again == from_a_fresh_process == fold(store.read(run_id))
