"""The composition of a command that reads or acts (the CLI's, the web view's):
settings, a Redis (located, maybe started: `agentledger.services.adapters.redis.locate`),
and the ports over it — the store, the run reader, the inbox, the broker's
admin. The entrypoints get their adapters here and never speak Redis; the
command says once, on stderr, which Redis it uses when that is not REDIS_URL."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis

from agentledger.events.state import RunState
from agentledger.services.adapters.archive.archive import Archive, open_archive
from agentledger.services.adapters.broker.admin_port import BrokerAdmin
from agentledger.services.adapters.broker.redis_admin import RedisBrokerAdmin
from agentledger.services.adapters.inbox.port import Inbox
from agentledger.services.adapters.inbox.redis_inbox import RedisInbox
from agentledger.services.adapters.live_text import LiveText, RedisLiveText
from agentledger.services.adapters.reading.archived import ArchivedReader, ArchivedStore
from agentledger.services.adapters.reading.port import RunReader
from agentledger.services.adapters.reading.redis_reader import RedisRunReader
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.adapters.redis.local_service import Waiting
from agentledger.services.adapters.redis.locate import Located, locate
from agentledger.services.adapters.store.port import EventStore
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.store.request_keys import RedisRequestKeys, RequestKeys
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.keys import Keys, keys_for
from agentledger.services.secrets import configure as configure_secrets
from agentledger.services.settings import Settings


@dataclass
class Session:
    settings: Settings
    client: redis.Redis
    keys: Keys
    store: EventStore
    located: Located
    reader: RunReader
    inbox: Inbox
    admin: BrokerAdmin
    requests: RequestKeys
    archive: Archive | None = None  # where finished runs go (None: AGENTLEDGER_ARCHIVE_URL=off)
    live_text: LiveText | None = None  # a model reply's text while it streams (None: not shown)

    def load(self, run_id: str) -> RunState | None:
        return cache_for(self.store).load(run_id)


@contextmanager
def open_session(
    settings: Settings, *, may_start: bool, waiting: Waiting | None = None
) -> Iterator[Session]:
    """`waiting` is told while a local Redis service is still loading its AOF."""
    found = locate(settings, may_start=may_start, waiting=waiting)
    if (notice := found.notice()) is not None:
        print(f"agentledger: {notice}", file=sys.stderr, flush=True)
    settings = settings.with_(redis_url=found.url)
    configure_secrets(settings)  # its password is a secret from here on
    client = redis_client(found.url)
    try:
        yield session_over(settings, client, found)
    finally:
        client.close()


def session_over(settings: Settings, client: redis.Redis, located: Located) -> Session:
    """The ports of a command over one Redis client; a run archived away from Redis
    is read from the archive (`agentledger.services.adapters.reading.archived`)."""
    keys = keys_for(settings)
    admin = RedisBrokerAdmin(client, keys, member_ttl_s=settings.member_ttl_s)
    store: EventStore = RedisEventStore(client, keys)
    reader: RunReader = RedisRunReader(client, keys)
    archive = open_archive(settings.archive_url, settings.state_dir, settings.prefix)
    if archive is not None:
        store, reader = ArchivedStore(store, archive), ArchivedReader(reader, archive)
    return Session(
        settings, client, keys, store, located, reader, RedisInbox(client, keys), admin,
        RedisRequestKeys(client, keys), archive, RedisLiveText(client, keys),
    )  # fmt: skip
