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

    @property
    def dramatiq_namespace(self) -> str:
        return f"{self.prefix}:dramatiq"
