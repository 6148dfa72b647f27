"""What a scrape reads from Redis, in the process that serves the metrics (off
every worker's hot path): runs by status from the shard indexes (the `live`
sets' runs folded, the held ones counted from the tenants' lines, the rest counted
as ended), and per task-queue pool the
lag and pending entries of its consumer group, the delayed messages and the
dead letters, summed over the shards and the tool sets that served it; the rejected inbox entries;
each concurrency key's holders, waiters and back-off (the busiest MAX_KEYS keys by
name, the rest summed under `key="(others)"`: keys made from arguments are many).
Read at most once per `min_interval_s` (concurrent scrapes share one reading)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.services.adapters.broker.streams_queue import GROUP
from agentledger.services.keys import Keys

NS = "agentledger"
MAX_LIVE_FOLDED = 5000  # live runs folded per scrape; beyond that they count as `live`
MAX_KEYS = 100  # concurrency keys named per scrape
MAX_LINES = 10_000  # tenants' lines on capped queues read per scrape
Usage = dict[str, tuple[int, int, float | None]]  # slot key -> holders, waiters, closed until


@dataclass(frozen=True, slots=True)
class Served:
    """One pool of a task queue: the streams of every tool set that ever served it
    (the directory's `toolsets` hash), since a backlog of old code is a backlog too."""

    queue: str
    pool: str


@dataclass(frozen=True, slots=True)
class Reading:
    runs: dict[str, int]
    queues: list[tuple[Served, dict[str, int]]]
    rejected: int
    keys: Usage


class RedisCollector(Collector):
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        shards: Callable[[], range],
        served: Sequence[Served],
        load_many: Callable[[Sequence[str]], Sequence[RunState | None]],
        usage: Callable[[], Usage] = dict,
        *,
        min_interval_s: float = 2.0,
    ) -> None:
        self.client = client
        self.keys = keys
        self.shards = shards
        self.served = list(served)
        self.load_many = load_many
        self.usage = usage
        self.min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._last: tuple[float, Reading] | None = None

    def reading(self) -> Reading:
        with self._lock:
            if self._last is None or time.monotonic() - self._last[0] >= self.min_interval_s:
                self._last = (time.monotonic(), self._read())
            return self._last[1]

    def _read(self) -> Reading:
        shards = self.shards()
        with self.client.pipeline(transaction=False) as pipe:
            for s in shards:
                pipe.zcard(self.keys.runs(s))
                pipe.zrange(self.keys.live(s), 0, MAX_LIVE_FOLDED - 1)
            for p in range(self.keys.inbox_partitions):
                pipe.xlen(self.keys.rejected(p))
            index: list[Any] = pipe.execute()
        total = sum(index[0 : 2 * len(shards) : 2])
        live_ids = [_text(r) for ids in index[1 : 2 * len(shards) : 2] for r in ids]
        rejected = sum(index[2 * len(shards) :])
        runs = {str(s): 0 for s in RunStatus if not s.terminal}
        for state in self.load_many(live_ids[:MAX_LIVE_FOLDED]) if live_ids else ():
            if state is not None and not state.status.terminal:
                runs[str(state.status)] += 1
        runs["held"] = self._held()  # not in the live index: counted from the lines
        runs["ended"] = max(0, total - len(live_ids) - runs["held"])
        queues = [(s, self._queue(s, shards)) for s in self.served]
        return Reading(runs, queues, rejected, busiest(self.usage()))

    def _held(self) -> int:
        """The runs held behind their tenants' caps (`agentledger.events.run_caps`): the
        lengths of the lines' held lists, at most MAX_LINES lines read."""
        found = self.client.scan_iter(match=self.keys.run_lines_held, count=1000)
        lines = [k for _, k in zip(range(MAX_LINES), found, strict=False)]
        if not lines:
            return 0
        with self.client.pipeline(transaction=False) as pipe:
            for key in lines:
                pipe.llen(key)
            return sum(int(n) for n in pipe.execute())

    def _queue(self, served: Served, shards: range) -> dict[str, int]:
        toolsets = [_text(t) for t in self.client.hkeys(self.keys.toolsets(served.queue))]
        streams = [
            self.keys.queue(s, served.queue, toolset, served.pool)
            for toolset in sorted(toolsets)
            for s in shards
        ]
        with self.client.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xinfo_groups(stream)
                pipe.zcard(self.keys.queue_delayed(stream))
                pipe.xlen(self.keys.queue_dead(stream))
            replies = pipe.execute(raise_on_error=False)
        out = {"lag": 0, "pending": 0, "delayed": 0, "dead": 0}
        for i in range(len(streams)):
            groups, delayed, dead = replies[3 * i : 3 * i + 3]
            for group in groups if isinstance(groups, list) else ():
                if _text(group.get("name", b"")) == GROUP:
                    out["lag"] += int(group.get("lag") or 0)
                    out["pending"] += int(group.get("pending") or 0)
            out["delayed"] += delayed if isinstance(delayed, int) else 0
            out["dead"] += dead if isinstance(dead, int) else 0
        return out

    def collect(self) -> Iterator[GaugeMetricFamily]:
        r = self.reading()
        runs = GaugeMetricFamily(
            f"{NS}_runs", "runs by status (live ones folded; ended counted)", labels=["status"]
        )
        for status, n in sorted(r.runs.items()):
            runs.add_metric([status], n)
        yield runs
        families = {
            "lag": GaugeMetricFamily(f"{NS}_queue_lag", "messages not yet delivered to the pool's consumer group", labels=["queue", "pool"]),
            "pending": GaugeMetricFamily(f"{NS}_queue_pending", "messages delivered and not yet acked", labels=["queue", "pool"]),
            "delayed": GaugeMetricFamily(f"{NS}_queue_delayed", "messages waiting for their retry time", labels=["queue", "pool"]),
            "dead": GaugeMetricFamily(f"{NS}_dead_letters", "dead-lettered messages kept (approximately capped)", labels=["queue", "pool"]),
        }  # fmt: skip
        for served, values in r.queues:
            for name, family in families.items():
                family.add_metric([served.queue, served.pool], values[name])
        yield from families.values()
        rejected = GaugeMetricFamily(
            f"{NS}_inbox_rejected_entries", "entries kept in the rejected inbox streams"
        )
        rejected.add_metric([], r.rejected)
        yield rejected
        yield from _key_families(r.keys)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # read only when scraped


def busiest(usage: Usage) -> Usage:
    """The MAX_KEYS keys with the most holders and waiters; the rest as `(others)`."""
    ranked = sorted(usage.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))
    out = dict(ranked[:MAX_KEYS])
    if rest := ranked[MAX_KEYS:]:
        out["(others)"] = (sum(v[0] for _, v in rest), sum(v[1] for _, v in rest), None)
    return out


def _key_families(usage: Usage) -> Iterator[GaugeMetricFamily]:
    held = GaugeMetricFamily(
        f"{NS}_limit_holders", "calls holding a slot of a concurrency key", labels=["key"]
    )
    waiting = GaugeMetricFamily(
        f"{NS}_limit_waiters", "calls waiting for a slot of a concurrency key", labels=["key"]
    )
    closed = GaugeMetricFamily(f"{NS}_limit_closed_until_seconds", "when a service's back-off on a concurrency key ends (Unix time; 0: open)", labels=["key"])  # fmt: skip
    for key, (n, w, until) in sorted(usage.items()):
        held.add_metric([key], n)
        waiting.add_metric([key], w)
        closed.add_metric([key], until or 0.0)
    yield from (held, waiting, closed)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
