"""The dramatiq Consumer over one `StreamQueue`: blocking XREADGROUP for up to
`prefetch` messages in hand, a tick (promote due delayed messages, heartbeat
what we hold, take over idle entries) at least every quarter of the claim idle
time, and ack / nack / requeue by stream entry id.

dramatiq's ConsumerThread calls `__next__` in a loop and hands messages to
worker threads, which call `ack` / `nack` from their own threads: the set of
held entry ids is the only shared state and sits behind a lock."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import redis
from dramatiq.broker import Consumer, MessageProxy
from dramatiq.errors import ConnectionClosed, DecodeError
from dramatiq.message import Message

from services.adapters.broker.streams_queue import Entry, StreamQueue

log = logging.getLogger(__name__)


class StreamMessage(MessageProxy):
    """A delivered message and where it came from."""

    def __init__(self, message: Message, entry_id: str, deliveries: int) -> None:  # type: ignore[type-arg]
        super().__init__(message)
        self.entry_id = entry_id
        self.deliveries = deliveries  # 1 on first delivery; each takeover adds one


class StreamsConsumer(Consumer):
    def __init__(self, queue: StreamQueue, name: str, *, prefetch: int, timeout_ms: int) -> None:
        self.queue = queue
        self.name = name
        self.prefetch = prefetch
        self.timeout_ms = timeout_ms
        self.tick_s = min(timeout_ms, queue.claim_idle_ms / 4) / 1000
        self._ready: deque[StreamMessage] = deque()
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._freed = threading.Event()
        self._next_tick = 0.0  # time.monotonic()
        self._next_due_ms: float | None = None  # wall clock, like the etas

    def __next__(self) -> StreamMessage | None:
        with _as_broker_errors():
            if not self._ready:
                self._fill()
        return self._ready.popleft() if self._ready else None

    def _fill(self) -> None:
        due = self._next_due_ms is not None and time.time() * 1000 >= self._next_due_ms
        if due or time.monotonic() >= self._next_tick:
            self._tick()
            if self._ready:
                return
        self._freed.clear()
        free = self._free_slots()
        if free <= 0:
            self._freed.wait(self.tick_s)  # an ack frees a slot and wakes us
            return
        self._accept(self.queue.read(self.name, count=free, block_ms=self._block_ms()))

    def _tick(self) -> None:
        now_ms = time.time() * 1000
        tick = self.queue.tick(self.name, now_ms=now_ms, claim_count=max(0, self._free_slots()))
        self._next_tick = time.monotonic() + self.tick_s
        self._next_due_ms = tick.next_due_ms
        if tick.claimed:
            log.warning("took over %d idle message(s) on %r", len(tick.claimed), self.queue.name)
        self._accept(tick.claimed)

    def _block_ms(self) -> int:
        """Block until the next tick or the next delayed message is due, at most `timeout_ms`."""
        wait_ms = min(self.timeout_ms, (self._next_tick - time.monotonic()) * 1000)
        if self._next_due_ms is not None:
            wait_ms = min(wait_ms, self._next_due_ms - time.time() * 1000)
        return max(1, int(wait_ms))

    def _accept(self, entries: list[Entry]) -> None:
        for entry_id, data, deliveries in entries:
            try:
                message = Message.decode(data)
            except DecodeError as exc:
                log.error("undecodable message %r on %r: %s", entry_id, self.queue.name, exc)
                self.queue.dead_letter(entry_id, data, reason="undecodable", deliveries=deliveries)
                continue
            with self._lock:
                self._held.add(entry_id)
            self._ready.append(StreamMessage(message, entry_id, deliveries))

    def _free_slots(self) -> int:
        with self._lock:
            return self.prefetch - len(self._held)

    def _release(self, entry_ids: Iterable[str]) -> None:
        with self._lock:
            self._held.difference_update(entry_ids)
        self._freed.set()

    def ack(self, message: StreamMessage) -> None:  # type: ignore[override]
        with _as_broker_errors():  # dramatiq retries a failed ack
            self.queue.ack(message.entry_id)
        self._release([message.entry_id])

    def nack(self, message: StreamMessage) -> None:  # type: ignore[override]
        with _as_broker_errors():
            self.queue.dead_letter(
                message.entry_id, message.encode(), reason="nack", deliveries=message.deliveries
            )
        self._release([message.entry_id])

    def requeue(self, messages: Iterable[StreamMessage]) -> None:  # type: ignore[override]
        """Messages this process will not run (shutdown): back on the stream, uncounted."""
        entry_ids = [message.entry_id for message in messages]
        with _as_broker_errors():
            self.queue.requeue(entry_ids)
        self._release(entry_ids)

    def close(self) -> None:
        unread, self._ready = list(self._ready), deque()
        try:
            self.requeue(unread)
        except ConnectionClosed:
            pass  # they go idle and another worker takes them over


@contextmanager
def _as_broker_errors() -> Iterator[None]:
    """Lost connections as dramatiq's error, which its threads know to retry."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ConnectionClosed(exc) from None
