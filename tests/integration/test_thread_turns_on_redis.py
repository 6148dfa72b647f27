"""A process's threads shared between tenants, on a real redis-server: a pool with
every slot taken reads ahead (a bounded number of messages), and a slot given back
goes to the message whose tenant, then run, was served least recently
(`agentledger.events.thread_turns`), not to the next in the stream. What is read
ahead stays pending in the consumer group: a process that dies with it leaves it
for another to take over."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from agentledger.events.commands import RequestModel
from agentledger.services.adapters.broker.budgets import Budgets, Slot
from agentledger.services.adapters.broker.outbox import encoded
from agentledger.services.adapters.broker.streams_broker import Route, StreamsBroker
from agentledger.services.adapters.broker.streams_consumer import StreamsConsumer
from agentledger.services.adapters.broker.streams_queue import GROUP
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.keys import Keys

URL = "redis://127.0.0.1:6379/0"
SHARDS = range(1)
ROUTE = Route("model", "q", "fp")


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    client = redis_client(URL)
    yield client
    client.close()


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    prefix = f"t-tt-{uuid.uuid4().hex[:10]}"
    yield prefix
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


def broker_of(client: redis.Redis, prefix: str, *, read_ahead: int = 16) -> StreamsBroker:
    return StreamsBroker(
        client, Keys(prefix, len(SHARDS)), worker_id=f"w-{uuid.uuid4().hex[:6]}", shards=SHARDS,
        claim_idle_ms=1000, member_ttl_s=0.5, budgets=Budgets({"model": 2}),
        read_ahead=read_ahead,
    )  # fmt: skip


def send(broker: StreamsBroker, run: str, tenant: str) -> None:
    name = broker.route(ROUTE)
    broker.stream(ROUTE, 0).push(encoded(name, RequestModel(run), tenant))


def read_ahead(consumer: StreamsConsumer, budgets: Budgets, count: int) -> None:
    deadline = time.monotonic() + 20
    while budgets.waiting("model") < count:
        assert time.monotonic() < deadline, f"read ahead {budgets.waiting('model')} of {count}"
        assert next(consumer) is None  # every slot taken: read and held, not started


def test_a_freed_slot_goes_to_the_tenant_served_least_recently_not_the_next_in_the_stream(
    client: redis.Redis, prefix: str
) -> None:
    broker = broker_of(client, prefix)
    budgets = broker.budgets
    assert budgets is not None
    consumer = broker.consume(broker.route(ROUTE), prefetch=2, timeout=100)
    try:
        assert next(consumer) is None  # the groups are made
        for i in range(2):
            send(broker, f"a-{i}", "tenant-a")
        first = [next(consumer), next(consumer)]  # A's first two take both slots
        assert all(m is not None for m in first)
        for i in range(2, 12):
            send(broker, f"a-{i}", "tenant-a")
        send(broker, "b-0", "tenant-b")
        read_ahead(consumer, budgets, 11)

        consumer.ack(first[0])  # type: ignore[arg-type]
        message = next(consumer)

        assert message is not None and message.args == ("b-0",), "B's run, not A's third"
        assert message.tenant == "tenant-b" and message.slot is not None
        consumer.ack(message)
        consumer.ack(first[1])  # type: ignore[arg-type]
        rest = []
        while len(rest) < 10:
            m = next(consumer)
            if m is not None:
                rest.append(m.args[0])
                consumer.ack(m)
        assert rest == [f"a-{i}" for i in range(2, 12)], "A's own runs in their order"
    finally:
        consumer.close()


def test_the_read_ahead_is_bounded_and_stays_pending_in_the_group(
    client: redis.Redis, prefix: str
) -> None:
    broker = broker_of(client, prefix, read_ahead=4)
    budgets = broker.budgets
    assert budgets is not None
    busy: list[Slot | None] = [budgets.take("model"), budgets.take("model")]
    consumer = broker.consume(broker.route(ROUTE), prefetch=2, timeout=100)
    try:
        assert next(consumer) is None
        for i in range(20):
            send(broker, f"a-{i}", "tenant-a")
        read_ahead(consumer, budgets, 4)
        for _ in range(50):
            assert next(consumer) is None
        stream = broker.stream(ROUTE, 0).stream
        pending = client.xpending(stream, GROUP)["pending"]

        assert budgets.waiting("model") == 4, "never more than the read-ahead"
        assert pending == 4, "what is read ahead is pending, not taken off the stream"
    finally:
        for slot in busy:
            assert slot is not None
            slot.release()
        consumer.close()


def test_a_dead_processs_read_ahead_is_taken_over_by_another(
    client: redis.Redis, prefix: str
) -> None:
    dead = broker_of(client, prefix, read_ahead=4)
    budgets = dead.budgets
    assert budgets is not None
    busy = [budgets.take("model"), budgets.take("model")]
    consumer = dead.consume(dead.route(ROUTE), prefetch=2, timeout=100)
    assert next(consumer) is None
    for i in range(4):
        send(dead, f"a-{i}", "tenant-a")
    read_ahead(consumer, budgets, 4)
    assert busy  # the process dies here: no tick keeps its read-ahead alive any more

    alive = broker_of(client, prefix)
    other = alive.consume(alive.route(ROUTE), prefetch=2, timeout=100)
    taken: list[str] = []
    deadline = time.monotonic() + 20
    try:
        while len(taken) < 4:
            assert time.monotonic() < deadline, f"took over only {taken}"
            m = next(other)
            if m is not None:
                taken.append(m.args[0])
                assert m.deliveries == 2, "a takeover counts as a delivery"
                other.ack(m)
    finally:
        other.close()
    assert sorted(taken) == [f"a-{i}" for i in range(4)]


def test_a_spare_slot_goes_at_once_to_a_tenant_with_nothing_running_never_to_the_busy_one(
    client: redis.Redis, prefix: str
) -> None:
    broker = StreamsBroker(
        client, Keys(prefix, len(SHARDS)), worker_id=f"w-{uuid.uuid4().hex[:6]}", shards=SHARDS,
        claim_idle_ms=1000, member_ttl_s=0.5,
        budgets=Budgets({"model": 2}, spares={"model": 1}),
    )  # fmt: skip
    budgets = broker.budgets
    assert budgets is not None
    consumer = broker.consume(broker.route(ROUTE), prefetch=2, timeout=100)
    try:
        assert next(consumer) is None
        for i in range(6):
            send(broker, f"a-{i}", "tenant-a")
        first = [next(consumer), next(consumer)]  # A's first two take the budget's slots
        assert all(m is not None for m in first)
        read_ahead(consumer, budgets, 4)
        for _ in range(20):
            assert next(consumer) is None, "A runs already: the spare is not A's"
        send(broker, "b-0", "tenant-b")

        deadline = time.monotonic() + 20
        message = None
        while message is None:
            assert time.monotonic() < deadline, "B never got the spare slot"
            message = next(consumer)

        assert message.args == ("b-0",) and message.slot is not None
        assert all(m is not None and m.slot is not None for m in first), "A's still run"
        consumer.ack(message)
        for m in first:
            consumer.ack(m)  # type: ignore[arg-type]
    finally:
        consumer.close()
