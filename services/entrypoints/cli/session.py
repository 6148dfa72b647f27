"""What every CLI command opens: settings, a Redis (found or started), the store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from events.state import RunState
from services.adapters.redis.local_server import PrivateRedis, find_or_start
from services.adapters.store.redis_store import RedisEventStore
from services.bootstrap import keys_for, redis_client
from services.handlers.state_cache import cache_for
from services.keys import Keys
from services.settings import Settings


@dataclass
class Session:
    settings: Settings
    client: redis.Redis
    keys: Keys
    store: RedisEventStore
    private: PrivateRedis | None

    def load(self, run_id: str) -> RunState | None:
        return cache_for(self.store).load(run_id)


@contextmanager
def open_session(settings: Settings) -> Iterator[Session]:
    url, private = find_or_start(settings.redis_url, settings.state_dir, settings.probe_url)
    settings = settings.with_(redis_url=url)
    client = redis_client(url)
    keys = keys_for(settings)
    try:
        yield Session(settings, client, keys, RedisEventStore(client, keys), private)
    finally:
        client.close()
        if private is not None:
            private.stop()
