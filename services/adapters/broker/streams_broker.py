"""A dramatiq broker on Redis Streams: one stream per queue read by one consumer
group, so a hop is a blocking XREADGROUP (no polling back-off), a message is
acked (XACK + XDEL) after it ran, a dead worker's messages are taken over
within `claim_idle_ms`, and a message delivered `max_deliveries` times without
an ack is dead-lettered. Kills count deliveries, never dramatiq's retries.

Delayed messages (dramatiq's `delay`, which Retries uses for its back-off) wait
in a sorted set per queue and join the stream when due; there are no `.DQ`
queues. The client must return bytes (redis-py's default).

A sender with many messages at once (the reactor) wraps its sends in
`batched()`: they go out in one pipeline, one round trip, when the block ends."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import dramatiq
import redis
from dramatiq.errors import QueueJoinTimeout
from dramatiq.message import Message
from dramatiq.middleware import Middleware

from services.adapters.broker.streams_consumer import StreamsConsumer
from services.adapters.broker.streams_queue import StreamQueue
from services.keys import Keys


class StreamsBroker(dramatiq.Broker):
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        claim_idle_ms: int = 3000,
        max_deliveries: int = 3,
        middleware: list[Middleware] | None = None,
    ) -> None:
        super().__init__(middleware=middleware)
        self.client = client
        self.keys = keys
        self.claim_idle_ms = claim_idle_ms
        self.max_deliveries = max_deliveries
        self.queues: set[str] = set()
        self._streams: dict[str, StreamQueue] = {}
        self._id = uuid.uuid4().hex[:8]
        self._batch = threading.local()

    def stream(self, queue_name: str) -> StreamQueue:
        """The Redis side of a queue, declared or not (senders need not declare)."""
        queue = self._streams.get(queue_name)
        if queue is None:
            queue = self._streams[queue_name] = StreamQueue(
                self.client, self.keys, queue_name, self.claim_idle_ms, self.max_deliveries
            )
        return queue

    def declare_queue(self, queue_name: str) -> None:
        if queue_name not in self.queues:
            self.emit_before("declare_queue", queue_name)
            self.queues.add(queue_name)
            self.stream(queue_name)
            self.emit_after("declare_queue", queue_name)

    def get_declared_queues(self) -> set[str]:
        return set(self.queues)

    def enqueue(self, message: Message, *, delay: int | None = None) -> Message:  # type: ignore[type-arg]
        self.emit_before("enqueue", message, delay)
        queue = self.stream(message.queue_name)
        pending: list[tuple[str, bytes]] | None = getattr(self._batch, "pending", None)
        if delay:
            queue.push_later(message.encode(), time.time() * 1000 + delay)
        elif pending is not None:
            pending.append((queue.stream, message.encode()))
        else:
            queue.push(message.encode())
        self.emit_after("enqueue", message, delay)
        return message

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Messages sent by this thread inside the block are pushed together at its end."""
        if getattr(self._batch, "pending", None) is not None:
            yield  # already inside a batch: its end pushes these too
            return
        self._batch.pending = pending = []
        try:
            yield
        finally:
            self._batch.pending = None
            if pending:
                with self.client.pipeline(transaction=False) as pipe:
                    for stream, data in pending:
                        pipe.xadd(stream, {"m": data})
                    pipe.execute()

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 5000) -> StreamsConsumer:
        name = f"{socket.gethostname()}:{os.getpid()}:{self._id}"
        return StreamsConsumer(self.stream(queue_name), name, prefetch=prefetch, timeout_ms=timeout)

    def flush(self, queue_name: str) -> None:
        """Drop a queue's messages: queued, in flight, delayed and dead."""
        self.stream(queue_name).flush()

    def flush_all(self) -> None:
        for queue_name in self.queues:
            self.flush(queue_name)

    def join(self, queue_name: str, *, interval: int = 50, timeout: int | None = None) -> None:
        """Wait until every message of the queue, delayed ones too, is acked or dead."""
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while self.stream(queue_name).size() > 0:
            if deadline is not None and time.monotonic() >= deadline:
                raise QueueJoinTimeout(queue_name)
            time.sleep(interval / 1000)
