"""Which tool sets serve which task queues. Every worker records its tool set's
manifest (modules, tools) under its queue when it starts, and heartbeats in its
pools' membership sets while it runs. The intake binds a run to the one tool
set a queue serves for the spec's modules when the message names none; `submit`
refuses a run no worker has ever served; `status` says when none is live."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from agentledger.events.commands import Pool
from agentledger.services.keys import Keys

MANIFESTS_KEPT = 256


@dataclass(frozen=True, slots=True)
class Served:
    queue: str
    toolset: str
    manifest: dict[str, Any]


def group(queue: str, toolset: str, pool: Pool | str) -> str:
    """The membership group of one pool of a task queue for one tool set."""
    return f"{queue}:{toolset}:{pool}"


class Directory:
    def __init__(self, client: redis.Redis, keys: Keys, *, member_ttl_s: float):
        self._r = client
        self._keys = keys
        self._ttl_ms = int(member_ttl_s * 1000)
        self._manifests: dict[tuple[str, str], dict[str, Any]] = {}

    def register(self, queue: str, toolset: str, manifest: dict[str, Any]) -> None:
        self._r.hset(self._keys.toolsets(queue), toolset, json.dumps(manifest, sort_keys=True))

    def toolsets(self, queue: str) -> dict[str, dict[str, Any]]:
        raw: dict[bytes, bytes] = self._r.hgetall(self._keys.toolsets(queue))  # type: ignore[assignment]
        return {k.decode(): json.loads(v) for k, v in raw.items()}

    def manifest(self, queue: str, toolset: str) -> dict[str, Any] | None:
        """The manifest of a tool set that served the queue (None: none did). A tool set's
        manifest is made from its code, which its fingerprint names: one found is kept
        (read-only), and one not found is asked again next time."""
        kept = self._manifests.get((queue, toolset))
        if kept is not None:
            return kept
        raw = self._r.hget(self._keys.toolsets(queue), toolset)
        if not raw:
            return None
        if len(self._manifests) >= MANIFESTS_KEPT:
            self._manifests.clear()
        found: dict[str, Any] = json.loads(raw)
        self._manifests[(queue, toolset)] = found
        return found

    def for_modules(self, queue: str, modules: list[str]) -> list[str]:
        """The registered tool sets of `queue` made of exactly these modules."""
        wanted = sorted(set(modules))
        return sorted(fp for fp, m in self.toolsets(queue).items() if m.get("modules") == wanted)

    def live(self, queue: str, toolset: str, pool: Pool | str = Pool.MODEL) -> list[str]:
        """The workers of that pool heard from within the membership ttl."""
        now_s, now_us = self._r.time()
        now_ms = now_s * 1000 + now_us // 1000
        key = self._keys.members(group(queue, toolset, pool))
        members: list[bytes] = self._r.zrangebyscore(key, now_ms - self._ttl_ms, "+inf")  # type: ignore[assignment]
        return [m.decode() for m in members]
