"""The broker's admin in memory, for unit tests: the workers each pool has, the
messages each holds, the queues' messages and dead letters. Its `serve`,
`hold` and `kill` play the pools' side. It passes the same contract suite as
the Redis admin."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from agentledger.events.commands import Pool
from agentledger.services.adapters.broker.admin_port import DeadLetter, Worker, dead_letter

Stream = tuple[str, str, str, int]  # queue, tool set, pool, shard


class MemoryBrokerAdmin:
    def __init__(self) -> None:
        self._manifests: dict[str, dict[str, list[str]]] = defaultdict(
            dict
        )  # queue -> tool set -> modules
        self._pools: dict[tuple[str, str, str], list[str]] = defaultdict(
            list
        )  # queue, tool set, worker
        self._held: dict[str, int] = defaultdict(int)
        self._queued: dict[Stream, list[bytes]] = defaultdict(list)
        self._dead: dict[Stream, dict[str, dict[bytes, bytes]]] = defaultdict(dict)
        self._next = 0
        self._lock = threading.Lock()

    def queues(self) -> list[str]:
        with self._lock:
            return sorted(self._manifests)

    def members(self) -> list[Worker]:
        with self._lock:
            return [
                Worker(worker, queue, toolset, modules, pools, self._held[worker])
                for queue, toolsets in sorted(self._manifests.items())
                for toolset, modules in toolsets.items()
                for (q, t, worker), pools in sorted(self._pools.items())
                if (q, t) == (queue, toolset)
            ]

    def manifest(self, queue: str, toolset: str) -> dict[str, Any] | None:
        with self._lock:
            modules = self._manifests.get(queue, {}).get(toolset)
        return None if modules is None else {"modules": modules}

    def live(self, queue: str, toolset: str, pool: Pool | str = Pool.MODEL) -> list[str]:
        with self._lock:
            return sorted(
                w
                for (q, t, w), pools in self._pools.items()
                if (q, t) == (queue, toolset) and str(pool) in pools
            )

    def dead_letters(self, queue: str | None = None) -> list[DeadLetter]:
        with self._lock:
            return [
                dead_letter(q, toolset, pool, shard, entry, fields)
                for (q, toolset, pool, shard), letters in sorted(self._dead.items())
                if queue is None or q == queue
                for entry, fields in letters.items()
            ]

    def redrive(self, queue: str, toolset: str, pool: str, shard: int, entry: str) -> bool:
        with self._lock:
            fields = self._dead[(queue, toolset, pool, shard)].pop(entry, None)
            if fields is None:
                return False
            self._queued[(queue, toolset, pool, shard)].append(fields[b"m"])
            return True

    # the pools' side
    def serve(
        self, worker: str, queue: str, toolset: str, pools: list[str], modules: list[str]
    ) -> None:
        with self._lock:
            self._manifests[queue][toolset] = sorted(set(modules))
            self._pools[(queue, toolset, worker)] = list(pools)

    def hold(self, worker: str, count: int) -> None:
        with self._lock:
            self._held[worker] += count

    def kill(self, stream: Stream, data: bytes, *, reason: str, deliveries: int) -> str:
        """A message the queue gave up on; its entry id."""
        with self._lock:
            self._next += 1
            entry = f"{self._next}-0"
            fields = {
                b"m": data,
                b"reason": reason.encode(),
                b"deliveries": str(deliveries).encode(),
            }
            self._dead[stream][entry] = fields
            return entry

    def queued(self, stream: Stream) -> list[bytes]:
        with self._lock:
            return list(self._queued[stream])
