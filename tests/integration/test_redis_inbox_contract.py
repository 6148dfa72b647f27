"""The inbox contract (`tests.contracts.inbox`) on the Redis inbox, on a real
redis-server with a key prefix of its own; the intake's side is played with the
intake's own commands (its group's reads, the rejected stream's digest, its
membership heartbeat)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import GROUP
from agentledger.services.adapters.inbox.redis_inbox import RedisInbox
from agentledger.services.keys import Keys
from agentledger.services.loops import rejections
from tests.contracts.inbox import TTL_S, InboxContract


class _Intake:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.r, self.keys = client, keys

    def _streams(self) -> list[str]:
        return [k.decode() for k in self.r.scan_iter(match=f"{self.keys.prefix}:*:inbox:*")]

    def read(self) -> None:
        for stream in self._streams():
            try:
                self.r.xgroup_create(stream, GROUP, id="0")
            except redis.ResponseError:  # BUSYGROUP: made by an earlier read
                pass
            self.r.xreadgroup(GROUP, "contract", {stream: ">"})

    def _entry(self, entry_id: str) -> tuple[str, str, dict[bytes, bytes]]:
        part, publisher, stream_id = entry_id.split("/", 2)
        stream = self.keys.inbox(int(part), publisher)
        found: Any = self.r.xrange(stream, stream_id, stream_id)
        return stream, stream_id, (found[0][1] if found else {})

    def refuse(self, entry_id: str, reason: str) -> None:
        stream, stream_id, fields = self._entry(entry_id)
        part, publisher, _ = entry_id.split("/", 2)
        self.r.xadd(
            self.keys.rejected(int(part)), rejections.digest(entry_id, publisher, reason, fields)
        )  # type: ignore[arg-type]
        self.r.xdel(stream, stream_id)

    def handled(self, entry_id: str) -> None:
        stream, stream_id, _ = self._entry(entry_id)
        self.r.xack(stream, GROUP, stream_id)
        self.r.xdel(stream, stream_id)

    def beat(self, publisher: str | None = None) -> None:
        Membership(self.r, self.keys.intake_members(publisher), "host:1:ab", ttl_s=TTL_S).beat()


class TestRedisInbox(InboxContract):
    @pytest.fixture
    def inbox(self, client: redis.Redis, keys: Keys) -> RedisInbox:
        return RedisInbox(client, keys)

    @pytest.fixture
    def intake(self, client: redis.Redis, keys: Keys) -> _Intake:
        return _Intake(client, keys)
