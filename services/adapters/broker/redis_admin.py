"""The broker's admin on Redis: queues from the tool-set directory, live workers
from the pools' membership sets and their pending entries (XPENDING), dead
letters from each queue stream's dead stream, re-drive by one script
(`redrive.lua`). Reads only, but for a re-drive: ops may run it."""

from __future__ import annotations

from collections import defaultdict
from importlib.resources import files
from typing import Any

import redis

from agentledger.events.commands import Pool
from agentledger.services.adapters.broker.admin_port import DeadLetter, Worker, dead_letter
from agentledger.services.adapters.broker.streams_queue import GROUP
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.redis.shards import shards_ever
from agentledger.services.keys import Keys

SCAN_COUNT = 500
_REDRIVE = files("agentledger.services.adapters.broker").joinpath("redrive.lua").read_text()


class RedisBrokerAdmin:
    def __init__(self, client: redis.Redis, keys: Keys, *, member_ttl_s: float) -> None:
        self._r = client
        self._keys = keys
        self._directory = Directory(client, keys, member_ttl_s=member_ttl_s)

    def queues(self) -> list[str]:
        head = self._keys.toolsets("")
        found = {
            (k.decode() if isinstance(k, bytes) else k)[len(head) :]
            for k in self._r.scan_iter(match=f"{head}*", count=SCAN_COUNT)
        }
        return sorted(found)

    def members(self) -> list[Worker]:
        keys, directory = self._keys, self._directory
        shards = shards_ever(self._r, keys, record=False)  # a read: ops may run it
        found: list[Worker] = []
        for queue in self.queues():
            for toolset, manifest in directory.toolsets(queue).items():
                pools: dict[str, list[str]] = defaultdict(list)
                for pool in Pool:
                    for worker in directory.live(queue, toolset, pool):
                        pools[worker].append(str(pool))
                if not pools:
                    continue
                held = self._in_flight(
                    [keys.queue(s, queue, toolset, str(p)) for s in shards for p in Pool]
                )
                found += [
                    Worker(w, queue, toolset, list(manifest.get("modules", [])), ps, held.get(w, 0))
                    for w, ps in sorted(pools.items())
                ]
        return found

    def manifest(self, queue: str, toolset: str) -> dict[str, Any] | None:
        return self._directory.manifest(queue, toolset)

    def live(self, queue: str, toolset: str, pool: Pool | str = Pool.MODEL) -> list[str]:
        return self._directory.live(queue, toolset, pool)

    def _in_flight(self, streams: list[str]) -> dict[str, int]:
        """Per consumer, the messages delivered and not yet acked, over these streams."""
        with self._r.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.exists(stream)
            present = [s for s, there in zip(streams, pipe.execute(), strict=True) if there]
        held: dict[str, int] = defaultdict(int)
        with self._r.pipeline(transaction=False) as pipe:
            for stream in present:
                pipe.xpending(stream, GROUP)
            replies = pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, dict):
                for consumer in reply.get("consumers") or []:
                    name = consumer["name"]
                    held[name.decode() if isinstance(name, bytes) else name] += int(
                        consumer["pending"]
                    )
        return held

    def dead_letters(self, queue: str | None = None) -> list[DeadLetter]:
        keys = self._keys
        found: list[DeadLetter] = []
        for q in [queue] if queue else self.queues():
            for toolset in self._directory.toolsets(q):
                for shard in shards_ever(self._r, keys, record=False):
                    for pool in Pool:
                        dead = keys.queue_dead(keys.queue(shard, q, toolset, str(pool)))
                        entries: list[tuple[bytes, dict[bytes, bytes]]] = self._r.xrange(dead)  # type: ignore[assignment]
                        for entry, fields in entries:
                            found.append(
                                dead_letter(q, toolset, str(pool), shard, entry.decode(), fields)
                            )
        return found

    def redrive(self, queue: str, toolset: str, pool: str, shard: int, entry: str) -> bool:
        stream = self._keys.queue(shard, queue, toolset, pool)
        return bool(self._r.eval(_REDRIVE, 2, self._keys.queue_dead(stream), stream, entry))
