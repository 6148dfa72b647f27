"""A dramatiq broker on Redis Streams, partitioned by shard. Each dramatiq queue is
one pool of one task queue for one tool set (`pool.queue.toolset`); its
messages live in one stream per shard (`al:{7}:q:<queue>:<toolset>:<pool>`), so
the writer of a run's step queues the next command in the same script as its
append. Every process reads every shard's stream of a queue; the shards it owns
(`membership`) are those whose delayed messages it promotes and whose dead
readers' messages it takes over. A hop is a
blocking XREADGROUP (no polling back-off); a message is acked (XACK + XDEL)
after it ran; a dead worker's messages are taken over within `claim_idle_ms`;
a message delivered `max_deliveries` times without an ack is dead-lettered.
Kills count deliveries, never dramatiq's retries. With `budgets`, a pool's
consumer takes only as many messages as its pool has threads free
(`agentledger.services.adapters.broker.budgets`).

Delayed messages (dramatiq's `delay`, which Retries uses for its back-off) wait
in a sorted set per stream and join the stream when due. The client must
return bytes (redis-py's default)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import dramatiq
import redis
from dramatiq.errors import QueueJoinTimeout
from dramatiq.message import Message
from dramatiq.middleware import Middleware

from agentledger.services.adapters.broker.budgets import CURRENT, Budgets
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.broker.outbox import queue_name
from agentledger.services.adapters.broker.streams_consumer import READ_AHEAD, StreamsConsumer
from agentledger.services.adapters.broker.streams_queue import StreamQueue
from agentledger.services.keys import Keys


@dataclass(frozen=True, slots=True)
class Route:
    """What a dramatiq queue name stands for."""

    pool: str
    queue: str
    toolset: str

    @property
    def name(self) -> str:
        return queue_name(self.pool, self.queue, self.toolset)

    @property
    def group(self) -> str:
        return f"{self.queue}:{self.toolset}:{self.pool}"


class SlotContext(Middleware):
    """Around each message a worker thread runs: its slot in its pool's budget, for
    the steps the delivery carries on (`agentledger.services.handlers.carry`)."""

    def before_process_message(self, broker: Any, message: Any) -> None:
        slot = getattr(message, "slot", None)
        CURRENT.set(slot if slot is not None and slot.process_wide else None)

    def after_process_message(
        self, broker: Any, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        CURRENT.set(None)

    after_skip_message = after_process_message


class StreamsBroker(dramatiq.Broker):
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        worker_id: str,
        shards: range,
        claim_idle_ms: int = 3000,
        max_deliveries: int = 3,
        member_ttl_s: float = 2.0,
        middleware: list[Middleware] | None = None,
        budgets: Budgets | None = None,
        read_ahead: int = READ_AHEAD,
    ) -> None:
        """`budgets`: each pool's threads (None: each queue's consumer takes as many
        messages as dramatiq's prefetch); `read_ahead`: the messages a busy pool reads
        ahead to choose among by tenant."""
        super().__init__(middleware=middleware)
        self.add_middleware(SlotContext())
        self.budgets = budgets
        self.read_ahead = read_ahead
        self.client = client
        self.keys = keys
        self.worker_id = worker_id
        self.shards = shards
        self.claim_idle_ms = claim_idle_ms
        self.max_deliveries = max_deliveries
        self.member_ttl_s = member_ttl_s
        self.queues: set[str] = set()
        self.routes: dict[str, Route] = {}
        self._streams: dict[str, StreamQueue] = {}
        self._members: dict[str, Membership] = {}

    def route(self, route: Route) -> str:
        """Say what a queue name stands for, before its actors are declared."""
        self.routes[route.name] = route
        return route.name

    def stream(self, route: Route, shard: int) -> StreamQueue:
        key = self.keys.queue(shard, route.queue, route.toolset, route.pool)
        queue = self._streams.get(key)
        if queue is None:
            queue = self._streams[key] = StreamQueue(
                self.client, key, self.claim_idle_ms, self.max_deliveries
            )
        return queue

    def membership(self, route: Route) -> Membership:
        found = self._members.get(route.group)
        if found is None:
            key = self.keys.members(route.group)
            found = self._members[route.group] = Membership(
                self.client, key, self.worker_id, ttl_s=self.member_ttl_s
            )
        return found

    def declare_queue(self, queue_name: str) -> None:
        if queue_name not in self.routes:
            raise ValueError(f"queue {queue_name!r} was not routed before it was declared")
        if queue_name not in self.queues:
            self.emit_before("declare_queue", queue_name)
            self.queues.add(queue_name)
            self.emit_after("declare_queue", queue_name)

    def get_declared_queues(self) -> set[str]:
        return set(self.queues)

    def enqueue(self, message: Message, *, delay: int | None = None) -> Message:  # type: ignore[type-arg]
        """A message sent through dramatiq itself (a retry): to its run's shard."""
        self.emit_before("enqueue", message, delay)
        route = self.routes[message.queue_name]
        queue = self.stream(route, self.keys.shard(str(message.args[0])) if message.args else 0)
        if delay:
            queue.push_later(message.encode(), time.time() * 1000 + delay)
        else:
            queue.push(message.encode())
        self.emit_after("enqueue", message, delay)
        return message

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> StreamsConsumer:
        route = self.routes[queue_name]
        return StreamsConsumer(
            self.client,
            self.membership(route),
            lambda shard: self.stream(route, shard),
            lambda: self.shards,
            prefetch=prefetch,
            timeout_ms=timeout,
            claim_idle_ms=self.claim_idle_ms,
            budgets=self.budgets
            if self.budgets is not None and self.budgets.serves(route.pool)
            else None,
            pool=route.pool,
            read_ahead=self.read_ahead,
        )

    def leave(self) -> None:
        for m in self._members.values():
            m.leave()

    def flush(self, queue_name: str) -> None:
        """Drop a queue's messages: queued, in flight, delayed and dead."""
        route = self.routes[queue_name]
        for shard in self.shards:
            self.stream(route, shard).flush()

    def flush_all(self) -> None:
        for name in self.queues:
            self.flush(name)

    def join(self, queue_name: str, *, interval: int = 50, timeout: int | None = None) -> None:
        """Wait until every message of the queue, delayed ones too, is acked or dead."""
        route = self.routes[queue_name]
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while sum(self.stream(route, s).size() for s in self.shards) > 0:
            if deadline is not None and time.monotonic() >= deadline:
                raise QueueJoinTimeout(queue_name)  # type: ignore[no-untyped-call]
            time.sleep(interval / 1000)
