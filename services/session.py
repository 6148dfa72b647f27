"""What every CLI command opens: settings, a Redis (located, maybe started:
`services.adapters.redis.locate`), the store. The command says once, on
stderr, which Redis it uses when that is not REDIS_URL."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from events.state import RunState
from services.adapters.redis.client import redis_client
from services.adapters.redis.locate import Located, locate
from services.adapters.store.redis_store import RedisEventStore
from services.entrypoints.cli.reply import say_loading
from services.handlers.state_cache import cache_for
from services.keys import Keys, keys_for
from services.secrets import configure as configure_secrets
from services.settings import Settings


@dataclass
class Session:
    settings: Settings
    client: redis.Redis
    keys: Keys
    store: RedisEventStore
    located: Located

    def load(self, run_id: str) -> RunState | None:
        return cache_for(self.store).load(run_id)


@contextmanager
def open_session(settings: Settings, *, may_start: bool) -> Iterator[Session]:
    found = locate(settings, may_start=may_start, waiting=say_loading)
    if (notice := found.notice()) is not None:
        print(f"agentledger: {notice}", file=sys.stderr, flush=True)
    settings = settings.with_(redis_url=found.url)
    configure_secrets(settings)  # its password is a secret from here on
    client = redis_client(found.url)
    keys = keys_for(settings)
    try:
        yield Session(settings, client, keys, RedisEventStore(client, keys), found)
    finally:
        client.close()
