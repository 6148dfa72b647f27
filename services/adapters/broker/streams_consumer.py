"""The dramatiq Consumer of one pool of a task queue: it reads the streams of
every shard of the queue, with one blocking XREADGROUP over all of them (on
Redis Cluster, where they sit in several slots: one per stream, all out at once
— `SlotReads`). The consumer group hands each entry to one reader, so a process
with a free thread takes the next message whichever shard it is in, and one
process's backlog never waits while another has threads idle; each read asks
each stream for its share of the process's free slots (at least one), so what
it takes beyond them is at most one entry per stream. Acks ride on the next
read (a redelivered message is a no-op, so an ack a kill lost costs nothing).
A tick — heartbeat, ownership, promotion of due delayed messages, our own
held entries kept alive, a dead reader's idle ones taken over — runs at least
every quarter of the claim idle time, pipelined over the streams of the shards
this process owns (`membership`) and those it holds entries of.

A message runs only with a slot of its pool's thread budget (`budgets`), held
until its message is acked (or back on the stream); an entry read beyond the free
slots waits here (held, kept alive). A pool with every slot taken reads ahead, up
to `read_ahead` messages, without blocking (an idle process's blocking read gets
new ones first), every 10 ms while new ones come and less often after each look
that finds none, and once more whenever a slot is given back; `Budgets.waiting`
counts them for the threads that carry runs on (`handlers.turns`). A slot given
back goes to the message whose tenant (then run) was served least recently
(`agentledger.events.thread_turns`; the tenant rides in the message's options), so
a tenant's backlog of slow steps holds another's behind the steps running, not the
backlog; a pool's spare slot (`Budgets.spare`) goes at once to a tenant with nothing
of the pool running here. What is read ahead stays pending in the group: a process
that dies leaves it idle, and another takes it over as any dead reader's.

dramatiq's ConsumerThread calls `__next__` in a loop and hands messages to
worker threads, which call `ack` / `nack` from their own threads: the held
entries and the acks to send are the shared state and sit behind a lock."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import redis
from dramatiq.broker import Consumer
from dramatiq.errors import ConnectionClosed, DecodeError
from dramatiq.message import Message
from redis.exceptions import NoScriptError

from agentledger.events.thread_turns import Turn, handed, next_up
from agentledger.services.adapters.broker.budgets import Budgets, Slot
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.broker.stream_message import (
    StreamMessage,
    as_broker_errors,
    entry_message,
    give_back,
    per_stream,
    text,
)
from agentledger.services.adapters.broker.streams_queue import (
    GROUP,
    TICK_LUA,
    Entry,
    StreamQueue,
    tick_reply,
)
from agentledger.services.adapters.redis.client import is_cluster
from agentledger.services.adapters.redis.direct import ThreadConnections
from agentledger.services.adapters.redis.slot_reads import SlotReads

log = logging.getLogger(__name__)
PEEK_S = 0.01  # a busy pool looks for messages that wait this often (while some do)
READ_AHEAD = 16  # messages a busy pool reads ahead, in all, to choose among by tenant


class StreamsConsumer(Consumer):
    def __init__(
        self,
        client: redis.Redis,
        membership: Membership,
        stream_of: Callable[[int], StreamQueue],
        shards: Callable[[], range],
        *,
        prefetch: int,
        timeout_ms: int,
        claim_idle_ms: int,
        budgets: Budgets | None = None,
        pool: str = "",
        read_ahead: int = READ_AHEAD,
    ) -> None:
        """`budgets` and `pool`: whose slots a delivery needs (None: a budget of
        `prefetch` of its own); `read_ahead`: how many messages a pool with every slot
        taken reads to choose among (at least 1)."""
        self.client = client
        self.membership = membership
        self.name = membership.me
        self._stream_of = stream_of
        self._shards = shards
        self.prefetch = prefetch
        self.timeout_ms = timeout_ms
        self.tick_s = claim_idle_ms / 4 / 1000  # heartbeat, ownership, takeovers
        self._owned: list[StreamQueue] = []  # ticked: delayed ones promoted, idle ones taken over
        self._by_stream: dict[str, StreamQueue] = {}
        self._every: list[StreamQueue] = []  # read: the streams of every shard of the queue
        self._seen: dict[str, StreamQueue] = {}  # every stream read: a late reply finds its queue
        self._slot_reads = SlotReads(client, GROUP, self.name) if is_cluster(client) else None
        # the plain-Redis read: acks and XREADGROUP on this thread's connection (a cluster
        # client has no single pool: there each slot is read by `SlotReads`)
        self._direct = None if self._slot_reads is not None else ThreadConnections(client)
        self._ready: deque[StreamMessage] = deque()  # each with its slot
        self._waiting: list[StreamMessage] = []  # read, held, no slot yet; in arrival order
        self._turn = Turn()  # whose turn among them (`agentledger.events.thread_turns`)
        self._out: dict[str, str] = {}  # entry id -> the tenant of a delivery not acked yet
        self.read_ahead = max(1, read_ahead)
        self._held: dict[str, StreamQueue] = {}  # entry id -> where it came from
        self._acks: list[tuple[StreamQueue, str]] = []
        self._lock = threading.Lock()
        self._freed = threading.Event()
        own = Budgets({pool: prefetch}, process_wide=False)
        self._budgets = budgets if budgets is not None else own
        self._pool = pool
        self._budgets.on_free(pool, self._freed)  # a slot given back wakes a wait for one
        self._next_tick = 0.0  # time.monotonic()
        self._next_due_ms: float | None = None  # wall clock, like the etas
        self._next_peek = 0.0  # time.monotonic(): a busy pool's next look for what waits
        self._peek_s = PEEK_S  # doubled after each look that found nothing

    def __next__(self) -> StreamMessage | None:
        with as_broker_errors():
            if not self._ready:
                self._top_up()
                self._slot_waiting()
            if not self._ready:
                self._fill()
        return self._ready.popleft() if self._ready else None

    def _top_up(self) -> None:
        """Before a slot given back goes to a message read ahead, read what came
        since (without blocking; acks ride on it): the choice is among the newest."""
        if self._waiting and self._peeks() and self._budgets.free(self._pool) > 0:
            self._read(self.read_ahead - len(self._waiting), block=False)

    def _slot_waiting(self) -> None:
        """Hand on the entries that wait, as far as their pool has slots free: each
        slot to the one whose turn it is."""
        while self._waiting:
            found = self._next_slot()
            if found is None:
                return
            i, slot = found
            self._turn = handed(self._waiting, i, self._turn)
            message = self._waiting.pop(i)
            message.slot = slot
            with self._lock:
                self._out[message.entry_id] = message.tenant
            self._ready.append(message)
            self._budgets.wait(self._pool, len(self._waiting))

    def _next_slot(self) -> tuple[int, Slot] | None:
        """The message whose turn it is and a slot for it: one of the budget's, else
        the spare, for the first in turn of the tenants with nothing running here."""
        slot = self._budgets.take(self._pool)
        if slot is not None:
            i = next_up(self._waiting, self._turn)
            assert i is not None
            return i, slot
        if not self._budgets.spare(self._pool):
            return None
        with self._lock:
            running = set(self._out.values())
        idle = [j for j, m in enumerate(self._waiting) if m.tenant not in running]
        j = next_up([self._waiting[k] for k in idle], self._turn)
        if j is None or (slot := self._budgets.take_spare(self._pool)) is None:
            return None
        return idle[j], slot

    def _fill(self) -> None:
        due = self._next_due_ms is not None and time.time() * 1000 >= self._next_due_ms
        if due or time.monotonic() >= self._next_tick:
            self._tick()
            if self._ready:
                return
        self._freed.clear()
        free = self._free_slots()
        if free <= 0 or not self._every:
            if self._peeks() and time.monotonic() >= self._next_peek:
                new = self._read(self.read_ahead - len(self._waiting), block=False)  # acks too
                # nothing new: look less often (slow steps hold the slots), down to a tick's
                self._peek_s = PEEK_S if new else min(2 * self._peek_s, self.tick_s)
                self._next_peek = time.monotonic() + self._peek_s
            else:
                self._flush_acks()
            wait_s = self._next_peek - time.monotonic() if self._peeks() else self.tick_s
            self._freed.wait(min(max(wait_s, 0.0), self.tick_s))  # a slot given back wakes us
            return
        self._peek_s = PEEK_S
        self._read(free)

    def _peeks(self) -> bool:
        """Whether a busy pool reads ahead (up to `read_ahead`, without blocking)."""
        return (
            self._budgets.process_wide
            and self._direct is not None
            and bool(self._every)
            and len(self._waiting) < self.read_ahead
        )

    def _read(self, count: int, *, block: bool = True) -> int:
        """Read up to about `count` entries (COUNT is per stream); how many were new."""
        if self._direct is None:
            return self._read_per_slot(count)
        streams = [q.stream for q in self._every]
        count = per_stream(count, len(streams))
        read: tuple[str | int, ...] = ("XREADGROUP", "GROUP", GROUP, self.name, "COUNT", count)
        if block:
            read += ("BLOCK", self._block_ms())
        reply = self._direct.pipeline(
            [*self._take_acks(), (*read, "STREAMS", *streams, *[">"] * len(streams))]
        )[-1]
        if isinstance(reply, redis.ResponseError):
            if not str(reply).startswith(("NOGROUP", "UNBLOCKED")):
                raise reply
            self._lost_groups()
            return 0
        entries: list[tuple[StreamQueue, Entry]] = []
        # as sent: {stream: [[id, [field, value, …]], …]} (RESP3), or [[stream, …], …] (RESP2)
        for stream, batch in reply.items() if isinstance(reply, dict) else reply or []:
            queue = self._seen[text(stream)]
            entries += [(queue, (text(eid), entry_message(fields), 1)) for eid, fields in batch]
        self._accept(entries)
        return len(entries)

    def _read_per_slot(self, count: int) -> int:
        assert self._slot_reads is not None
        self._flush_acks()
        streams = [q.stream for q in self._every]
        count = per_stream(count, len(streams))
        try:
            reply = self._slot_reads.read(streams, count=count, block_ms=self._block_ms())
        except redis.ResponseError as exc:
            if not str(exc).startswith(("NOGROUP", "UNBLOCKED")):
                raise
            self._lost_groups()
            return 0
        entries: list[tuple[StreamQueue, Entry]] = []
        for stream, batch in reply:
            queue = self._seen[text(stream)]
            entries += [(queue, (text(eid), fields[b"m"], 1)) for eid, fields in batch]
        self._accept(entries)
        return len(entries)

    def _lost_groups(self) -> None:
        """A stream read has no consumer group (flushed, a fresh Redis, or a shard whose
        owner has not ticked it yet): made again on every stream read, and tick again."""
        for q in self._every:
            q.ensure_group()
        self._next_tick = 0.0

    def _tick(self) -> None:
        self.membership.beat()
        shards = self._shards()
        owned = [self._stream_of(s) for s in self.membership.owned(shards)]
        self._owned = owned
        self._by_stream = {q.stream: q for q in owned}
        self._every = [self._stream_of(s) for s in shards]
        self._seen.update((q.stream, q) for q in self._every)
        self._next_tick = time.monotonic() + self.tick_s
        # what we hold we keep alive, owned or not (ownership moves; a message does not)
        with self._lock:
            holding = {q.stream: q for q in self._held.values() if q.stream not in self._by_stream}
        ticked = owned + list(holding.values())
        if not ticked:
            return
        now_ms = time.time() * 1000
        claim = max(0, self._free_slots())
        replies = self._tick_all(ticked, now_ms, claim, takes=len(owned))
        next_due: list[float] = []
        claimed: list[tuple[StreamQueue, Entry]] = []
        for queue, reply in zip(ticked, replies, strict=True):
            tick = tick_reply(reply)
            if tick.next_due_ms is not None:
                next_due.append(tick.next_due_ms)
            claimed += [(queue, e) for e in tick.claimed]
        self._next_due_ms = min(next_due) if next_due else None
        if claimed:
            log.warning("took over %d idle message(s)", len(claimed))
        self._accept(claimed)

    def _tick_all(
        self, streams: list[StreamQueue], now_ms: float, claim: int, *, takes: int
    ) -> list[Any]:
        """Tick every stream; only the first `takes` (the owned ones) take over idle entries."""
        for _ in range(2):
            with self.client.pipeline(transaction=False) as pipe:
                self._queue_acks(pipe)
                for i, q in enumerate(streams):
                    q.tick(
                        self.name, now_ms=now_ms, claim_count=claim if i < takes else 0, pipe=pipe
                    )
                try:
                    replies = pipe.execute()
                except NoScriptError:
                    self.client.script_load(TICK_LUA)
                    continue
            return replies[len(replies) - len(streams) :]
        raise NoScriptError("the queue tick script was not loaded")

    def _block_ms(self) -> int:
        """Block until the next tick or the next delayed message is due, at most `timeout_ms`."""
        wait_ms = min(self.timeout_ms, (self._next_tick - time.monotonic()) * 1000)
        if self._next_due_ms is not None:
            wait_ms = min(wait_ms, self._next_due_ms - time.time() * 1000)
        return max(1, int(wait_ms))

    def _accept(self, entries: Iterable[tuple[StreamQueue, Entry]]) -> None:
        for queue, (entry_id, data, deliveries) in entries:
            try:
                message = Message.decode(data)
            except DecodeError as exc:
                log.error("undecodable message %r on %r: %s", entry_id, queue.stream, exc)
                queue.dead_letter(entry_id, data, reason="undecodable", deliveries=deliveries)
                continue
            with self._lock:
                self._held[entry_id] = queue
            self._waiting.append(StreamMessage(message, queue, entry_id, deliveries))
        self._budgets.wait(self._pool, len(self._waiting))
        self._slot_waiting()

    def _free_slots(self) -> int:
        """Slots of the pool free for what is not read yet."""
        return self._budgets.free(self._pool) - len(self._waiting)

    def _take_acks(self) -> list[tuple[str, ...]]:
        with self._lock:
            acks, self._acks = self._acks, []
        return [command for queue, entry_id in acks for command in queue.ack_commands(entry_id)]

    def _queue_acks(self, pipe: Any) -> None:
        for command in self._take_acks():
            pipe.execute_command(*command)

    def _flush_acks(self) -> None:
        with self._lock:
            if not self._acks:
                return
        with self.client.pipeline(transaction=False) as pipe:
            self._queue_acks(pipe)
            pipe.execute()

    def _release(self, messages: Iterable[StreamMessage]) -> None:
        with self._lock:
            for m in messages:
                self._held.pop(m.entry_id, None)
                self._out.pop(m.entry_id, None)
        self._freed.set()

    def ack(self, message: StreamMessage) -> None:  # type: ignore[override]
        give_back(message)
        with self._lock:
            self._acks.append((message.queue, message.entry_id))
        self._release([message])

    def nack(self, message: StreamMessage) -> None:  # type: ignore[override]
        give_back(message)
        with as_broker_errors():
            message.queue.dead_letter(
                message.entry_id, message.encode(), reason="nack", deliveries=message.deliveries
            )
        self._release([message])

    def requeue(self, messages: Iterable[StreamMessage]) -> None:  # type: ignore[override]
        """Messages this process will not run (shutdown): back on the stream, uncounted."""
        messages = list(messages)
        by_queue: dict[str, tuple[StreamQueue, list[str]]] = {}
        for m in messages:
            give_back(m)
            by_queue.setdefault(m.queue.stream, (m.queue, []))[1].append(m.entry_id)
        with as_broker_errors():
            for queue, ids in by_queue.values():
                queue.requeue(ids)
        self._release(messages)

    def close(self) -> None:
        self._budgets.forget(self._pool, self._freed)
        if self._slot_reads is not None:
            self._slot_reads.close()
        unread = [*self._ready, *self._waiting]
        self._ready, self._waiting = deque(), []
        self._budgets.wait(self._pool, 0)
        try:
            self._flush_acks()
            self.requeue(unread)
        except (ConnectionClosed, redis.RedisError):
            pass  # they go idle and another worker takes them over
