"""Each pool's thread budget on the Redis-Streams broker, on a real redis-server:
a pool runs no more of its messages at once than its budget, however many wait
and however many threads the process has; a slow pool full of work leaves
another pool's messages running at once; every message still runs once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import dramatiq
import pytest
import redis

from agentledger.services.adapters.broker.budgets import Budgets, current_slot
from agentledger.services.adapters.broker.streams_broker import Route, StreamsBroker
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.keys import Keys

URL = "redis://127.0.0.1:6379/0"
SHARDS = range(4)


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    client = redis_client(URL)
    yield client
    client.close()


@pytest.fixture
def broker(client: redis.Redis) -> Iterator[StreamsBroker]:
    prefix = f"t-pb-{uuid.uuid4().hex[:10]}"
    yield StreamsBroker(
        client, Keys(prefix, len(SHARDS)), worker_id=f"w-{uuid.uuid4().hex[:6]}", shards=SHARDS,
        claim_idle_ms=1000, member_ttl_s=0.5, budgets=Budgets({"accept": 2, "model": 2}),
    )  # fmt: skip
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


def test_a_slow_pool_runs_no_more_than_its_budget_and_never_holds_another_pools_threads(
    broker: StreamsBroker,
) -> None:
    accept = broker.route(Route("accept", "q", "fp"))
    model = broker.route(Route("model", "q", "fp"))
    release = threading.Event()
    lock = threading.Lock()
    running = {"accept": 0, "most": 0}
    done: list[str] = []
    pools: list[str | None] = []

    @dramatiq.actor(broker=broker, queue_name=accept)
    def slow_check(n: int) -> None:
        with lock:
            running["accept"] += 1
            running["most"] = max(running["most"], running["accept"])
        release.wait(20)
        with lock:
            running["accept"] -= 1
            done.append(f"a{n}")

    @dramatiq.actor(broker=broker, queue_name=model)
    def quick(n: int) -> None:
        slot = current_slot()
        pools.append(slot.pool if slot is not None else None)
        done.append(f"m{n}")

    worker = dramatiq.Worker(broker, worker_threads=4, worker_timeout=100)  # the budgets' sum
    worker.start()
    try:
        for n in range(6):
            slow_check.send(n)
        deadline = time.monotonic() + 10
        while running["accept"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        for n in range(3):
            quick.send(n)
        deadline = time.monotonic() + 10
        while len([d for d in done if d.startswith("m")]) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)

        assert sorted(d for d in done if d.startswith("m")) == ["m0", "m1", "m2"], (
            "the model pool's messages waited behind the slow pool"
        )
        assert pools == ["model"] * 3
        assert running["accept"] == 2 and running["most"] == 2
        release.set()
        broker.join(accept, timeout=20_000)
    finally:
        release.set()
        worker.stop(timeout=5000)
    assert sorted(done) == sorted([f"a{n}" for n in range(6)] + ["m0", "m1", "m2"])
    assert running["most"] == 2
    assert broker.budgets is not None
    assert broker.budgets.free("accept") == 2 and broker.budgets.free("model") == 2


def test_a_busy_pool_learns_of_a_waiting_message_and_starts_it_on_the_next_free_slot(
    broker: StreamsBroker,
) -> None:
    # a pool with every slot taken still looks (without blocking) for a message that waits:
    # it holds it, says so to the carrying threads (`Budgets.waiting`), and starts it first
    model = broker.route(Route("model", "q", "fp"))

    @dramatiq.actor(broker=broker, queue_name=model)
    def ask(n: int) -> None:
        pass

    budgets = broker.budgets
    assert budgets is not None
    consumer = broker.consume(model, prefetch=2, timeout=100)
    try:
        assert next(consumer) is None  # the groups are made, nothing waits
        busy = [budgets.take("model"), budgets.take("model")]
        assert budgets.waiting("model") == 0
        ask.send(1)
        deadline = time.monotonic() + 20
        while budgets.waiting("model") == 0:
            assert time.monotonic() < deadline, "the busy pool never saw the message"
            assert next(consumer) is None  # no slot: read and held, not started
        assert budgets.waiting("model") == 1
        busy[0].release()  # type: ignore[union-attr]
        message = next(consumer)
        assert message is not None and message.args == (1,) and message.slot is not None
        assert budgets.waiting("model") == 0
        consumer.ack(message)
        busy[1].release()  # type: ignore[union-attr]
    finally:
        consumer.close()
