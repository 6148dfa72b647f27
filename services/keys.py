"""Key names. Every key of a run carries its shard as a Redis Cluster hash tag
(`al:{7}:run:<id>`), so one script can append to the run, its shard's feed
and indexes, and the task-queue streams of that shard atomically.

A run's shard is recorded in its id (`r-….s7`) when agentledger makes the id, so
the mapping is never recomputed: `AGENTLEDGER_SHARDS` may grow for new runs
while old ones keep theirs. An id without the suffix (chosen by a publisher)
maps by a hash over the shard count. Task-queue streams are partitioned by the
same shards; the inbox by its own partitions. Ledger and request keys are
digests: no argument, secret or request id ever appears in a key name. Each
publisher has its own inbox stream per partition (`<prefix>:{in<N>}:inbox:<name>`)."""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentledger.services.settings import Settings

_SUFFIX = re.compile(r"\.s(\d{1,4})$")
_INBOX = re.compile(r"^:\{in(\d+)\}:inbox:(.+)$")
LOCK_PARTS = ("req", "order", "holders", "tokens", "leases", "seq", "closed", "served", "waits")


@lru_cache(maxsize=4096)
def _shard(run_id: str, shards: int) -> int:
    """A run's shard, asked several times per step: kept for the runs last asked about."""
    found = _SUFFIX.search(run_id)
    if found is not None:
        return int(found.group(1))
    return zlib.crc32(run_id.encode()) % shards


def digest(text: str, n: int = 32) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str
    shards: int  # for new runs; readers read every shard ever used (see `meta`)
    inbox_partitions: int = 4
    lock_partitions: int = 1

    def shard(self, run_id: str) -> int:
        return _shard(run_id, self.shards)

    def run(self, run_id: str) -> str:
        return f"{self.prefix}:{{{self.shard(run_id)}}}:run:{run_id}"

    def snapshot(self, run_id: str) -> str:
        """Hash: the newest snapshot of the run's folded state (a cache checked against the log)."""
        return f"{self.prefix}:{{{self.shard(run_id)}}}:snap:{run_id}"

    def overflow(self, run_id: str) -> str:
        """Hash: the run's overflow pages ('<event id>:<n>' -> text), the rest of tool-made
        fields too large for their event (`agentledger.events.output_cap`); part of the log."""
        return f"{self.prefix}:{{{self.shard(run_id)}}}:over:{run_id}"

    def live_text(self, run_id: str) -> str:
        """String: the text of the run's model reply while it streams (the web view's),
        short-lived, never the run's record (`agentledger.services.adapters.live_text`)."""
        return f"{self.prefix}:{{{self.shard(run_id)}}}:said:{run_id}"

    def feed(self, shard: int) -> str:
        """Stream: one entry per append of the shard's runs (for `tail` and ops)."""
        return f"{self.prefix}:{{{shard}}}:feed"

    def runs(self, shard: int) -> str:
        """Sorted set of the shard's runs by creation time."""
        return f"{self.prefix}:{{{shard}}}:runs"

    def live(self, shard: int) -> str:
        """Sorted set of the shard's live runs by time of last progress or look (a
        parked run's: its next deadline less a lease, `agentledger.events.looks`)."""
        return f"{self.prefix}:{{{shard}}}:live"

    def queue(self, shard: int, queue: str, toolset: str, pool: str) -> str:
        """The stream of one pool of a task queue, for one tool set, in one shard."""
        return f"{self.prefix}:{{{shard}}}:q:{queue}:{toolset}:{pool}"

    def queue_delayed(self, stream: str) -> str:
        """Sorted set of a queue stream's delayed messages by due time (ms)."""
        return f"{stream}:delayed"

    def queue_dead(self, stream: str) -> str:
        """Stream of a queue stream's dead letters: nacked, undecodable, delivered too often."""
        return f"{stream}:dead"

    def inbox(self, partition: int, publisher: str) -> str:
        """Stream: one publisher's entries of one inbox partition. A publisher writes
        only its own streams (its Redis user reaches no other); every stream of a
        partition shares its hash tag, so one XREADGROUP reads them all."""
        return f"{self.prefix}:{{in{partition}}}:inbox:{publisher}"

    def inbox_publisher(self, stream: str) -> tuple[int, str] | None:
        """The partition and publisher an inbox stream belongs to (None: not one)."""
        found = _INBOX.match(stream[len(self.prefix) :]) if stream.startswith(self.prefix) else None
        return (int(found.group(1)), found.group(2)) if found else None

    def rejected(self, partition: int) -> str:
        return f"{self.prefix}:{{in{partition}}}:rejected"

    def request(self, publisher: str, request_id: str) -> str:
        """String: the run a publisher's request id names (set once, by the intake).
        Request ids are per publisher: another publisher's same id is another key."""
        h = digest(f"{publisher}\n{request_id}")
        return f"{self.prefix}:{{rq{h[:4]}}}:request:{h}"

    def nonce(self, partition: int, publisher: str, nonce: str) -> str:
        """String: when a publisher's nonce was first seen (kept for twice the replay
        window), under an inbox partition's hash tag; the nonce itself is never in it."""
        h = digest(f"{publisher}\n{nonce}")
        return f"{self.prefix}:{{in{partition}}}:nonce:{h}"

    @staticmethod
    def named_shard(run_id: str) -> int | None:
        """The shard a run id's `.s<N>` suffix names (None: it names none)."""
        found = _SUFFIX.search(run_id)
        return int(found.group(1)) if found is not None else None

    def ledger(self, op_key: str) -> str:
        h = digest(op_key)
        return f"{self.prefix}:{{ld{h[:4]}}}:ledger:{h}"

    def locks(self, partition: int) -> list[str]:
        """The keys of one partition of the lock table, under one hash tag."""
        return [f"{self.prefix}:{{lk{partition}}}:locks:{part}" for part in LOCK_PARTS]

    def run_line(self, queue: str, tenant: str) -> list[str]:
        """A tenant's line on a capped task queue (`agentledger.events.run_caps`): the set
        of its live runs there and the list of its held ones, under one hash tag made
        from a digest (a tenant's name may hold any character, braces too)."""
        h = digest(f"{queue}\n{tenant}", 16)
        return [f"{self.prefix}:{{rl{h}}}:line:{part}" for part in ("live", "held")]

    @property
    def run_lines_held(self) -> str:
        """The pattern of every line's held list (the metrics count them)."""
        return f"{self.prefix}:{{rl*}}:line:held"

    def members(self, group: str) -> str:
        """Sorted set of the live processes of a group by last heartbeat (ms, Redis time)."""
        return f"{self.prefix}:members:{group}"

    def intake_members(self, publisher: str | None = None) -> str:
        """Sorted set: the live deployment intakes (`all`), or the embedded run's intakes
        of one publisher (which own that publisher's streams alone). Apart from the
        pools' `members`, so the workers' Redis user cannot pose as an intake."""
        return f"{self.prefix}:intakes:" + ("all" if publisher is None else f"pub:{publisher}")

    def toolsets(self, queue: str) -> str:
        """Hash: fingerprint -> manifest of every tool set that served the task queue."""
        return f"{self.prefix}:toolsets:{queue}"

    @property
    def meta(self) -> str:
        """Hash: facts of the deployment (the largest shard count ever used, the
        lock table's partitions)."""
        return f"{self.prefix}:meta"


def keys_for(settings: Settings) -> Keys:
    """The keys of a deployment; the lock partitions are this Redis's recorded count
    (`agentledger.services.lock_partitions`), filled in by the composition root."""
    return Keys(
        settings.prefix,
        settings.shards,
        inbox_partitions=settings.inbox_partitions,
        lock_partitions=settings.lock_partitions or 1,
    )
