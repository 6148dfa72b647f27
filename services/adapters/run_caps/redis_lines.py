"""The lines on Redis: one registered script (`run_caps.lua`) over a tenant's two
keys on a queue (`Keys.run_line`, one hash tag: one slot on a cluster)."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import redis

from agentledger.events.run_caps import Line
from agentledger.services.keys import Keys

_SCRIPT = files("agentledger.services.adapters.run_caps").joinpath("run_caps.lua").read_text()


class RedisRunLines:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._script = client.register_script(_SCRIPT)
        self._keys = keys

    def _call(self, queue: str, tenant: str, *args: Any) -> Any:
        return self._script(keys=self._keys.run_line(queue, tenant), args=list(args))

    def admit(self, queue: str, tenant: str, run_id: str, most: int) -> int:
        return int(self._call(queue, tenant, "admit", run_id, most))

    def finish(self, queue: str, tenant: str, run_id: str, most: int) -> list[str]:
        return [_text(r) for r in self._call(queue, tenant, "finish", run_id, most)]

    def look(self, queue: str, tenant: str) -> Line:
        live, held = self._call(queue, tenant, "look", "", 0)
        return Line(frozenset(_text(r) for r in live), tuple(_text(r) for r in held))

    def first_held(self, limit: int) -> list[str]:
        found = self._client.scan_iter(match=self._keys.run_lines_held, count=1000)
        lines = [k for _, k in zip(range(limit), found, strict=False)]
        if not lines:
            return []
        with self._client.pipeline(transaction=False) as pipe:
            for key in lines:
                pipe.lindex(key, 0)
            return [_text(r) for r in pipe.execute() if r is not None]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
