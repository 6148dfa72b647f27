"""Key names. Every key of a run carries its shard as a Redis Cluster hash tag,
so one script can write the run and its shard's feed atomically."""

from __future__ import annotations

import zlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str
    shards: int

    def shard(self, run_id: str) -> int:
        return zlib.crc32(run_id.encode()) % self.shards

    def run(self, run_id: str) -> str:
        return f"{self.prefix}:{{{self.shard(run_id)}}}:run:{run_id}"

    def snapshot(self, run_id: str) -> str:
        """Hash: the newest snapshot of the run's folded state (a cache checked against the log)."""
        return f"{self.prefix}:{{{self.shard(run_id)}}}:snap:{run_id}"

    def feed(self, shard: int) -> str:
        return f"{self.prefix}:{{{shard}}}:feed"

    def runs(self, shard: int) -> str:
        """Sorted set of the shard's runs by creation time."""
        return f"{self.prefix}:{{{shard}}}:runs"

    def live(self, shard: int) -> str:
        """Sorted set of the shard's live runs by time of last progress."""
        return f"{self.prefix}:{{{shard}}}:live"

    @property
    def inbox(self) -> str:
        return f"{self.prefix}:inbox"

    @property
    def rejected(self) -> str:
        return f"{self.prefix}:inbox:rejected"

    def queue(self, name: str) -> str:
        """The stream of a worker queue; each queue is its own hash tag, so a
        queue's stream, delayed set and dead letters can share one script."""
        return f"{self.prefix}:{{q:{name}}}:queue"

    def queue_delayed(self, name: str) -> str:
        """Sorted set of a queue's delayed messages by due time (ms)."""
        return f"{self.prefix}:{{q:{name}}}:delayed"

    def queue_dead(self, name: str) -> str:
        """Stream of a queue's dead letters: nacked, undecodable or delivered too often."""
        return f"{self.prefix}:{{q:{name}}}:dead"

    @property
    def dramatiq_namespace(self) -> str:
        return f"{self.prefix}:dramatiq"
