"""The request keys retention takes out with their runs: what a publisher's
request id names (`<run id> <request digest>`, set once by the intake), read, and
deleted only while it still holds what was read (one atomic compare-and-delete).
The memory twin holds them in a dict, for unit tests."""

from __future__ import annotations

import threading
from typing import Any, Protocol

import redis

from agentledger.services.keys import Keys

_FORGET = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RequestKeys(Protocol):
    def name(self, publisher: str, request_id: str) -> str:
        """The key's name (what its tombstone in the archive is filed under)."""
        ...

    def value(self, publisher: str, request_id: str) -> str | None: ...

    def forget(self, publisher: str, request_id: str, value: str) -> None:
        """Delete the key if it still holds `value`."""
        ...


class RedisRequestKeys:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._r = client
        self._keys = keys
        self._forget = client.register_script(_FORGET)

    def name(self, publisher: str, request_id: str) -> str:
        return self._keys.request(publisher, request_id)

    def value(self, publisher: str, request_id: str) -> str | None:
        found: Any = self._r.get(self.name(publisher, request_id))
        return None if found is None else bytes(found).decode()

    def forget(self, publisher: str, request_id: str, value: str) -> None:
        self._forget(keys=[self.name(publisher, request_id)], args=[value])


class MemoryRequestKeys:
    def __init__(self, keys: Keys | None = None) -> None:
        self._keys = keys or Keys("mem", 1)
        self.held: dict[str, str] = {}
        self._lock = threading.Lock()

    def name(self, publisher: str, request_id: str) -> str:
        return self._keys.request(publisher, request_id)

    def claim(self, publisher: str, request_id: str, value: str) -> bool:
        """As the intake claims one: set it unless it is set."""
        with self._lock:
            return self.held.setdefault(self.name(publisher, request_id), value) == value

    def value(self, publisher: str, request_id: str) -> str | None:
        with self._lock:
            return self.held.get(self.name(publisher, request_id))

    def forget(self, publisher: str, request_id: str, value: str) -> None:
        with self._lock:
            if self.held.get(name := self.name(publisher, request_id)) == value:
                del self.held[name]
