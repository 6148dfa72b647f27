"""F, the floor, measured in the same run on the same Redis: a raw XADD round
trip, a request/reply through two streams with blocking reads (the responder
in a process of its own), the store's Lua append of one event, a lock
acquire + release pair through `agentledger.services.adapters.locks.redis_locks.RedisLocks`, and a chain of
dramatiq messages (each actor sends the next) through dramatiq's stock Redis
broker and through ours. Medians of `ops` operations; run as
`python -m tests.bench.floor respond URL REQ REP` it is the responder."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from statistics import median
from typing import Any

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.events.types import ToolCallSucceeded
from agentledger.services.adapters.broker.streams_broker import Route, StreamsBroker
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.bootstrap import redis_client
from agentledger.services.handlers.runs import envelopes
from tests.bench.harness import REPO_ROOT, Bench, BenchError

PAYLOAD = {"e": b"x" * 100}


def measure(bench: Bench, prefix: str, ops: int, hops: int) -> dict[str, float]:
    client = bench.client
    store = bench.store(prefix)
    event = ToolCallSucceeded(call_id="c1", output={"n": 1}, started_at=0.0, finished_at=0.0)
    batches = [envelopes("floor", [event], after_seq=i, at=0.0, source="bench") for i in range(ops)]
    locks = RedisLocks(client, bench.keys(prefix), lease_s=5.0)
    xadd = f"{prefix}:xadd"
    return {
        "xadd_ms": timed(ops, lambda i: client.xadd(xadd, PAYLOAD, maxlen=1000)),  # type: ignore[arg-type]
        "stream_rtt_ms": stream_round_trip(bench, prefix, ops),
        "append_ms": timed(
            ops, lambda i: store.append("floor", batches[i], expected_seq=i, live=False)
        ),
        "lock_pair_ms": timed(ops, lambda i: _lock_pair(locks, i)),
        "dramatiq_hop_ms": dramatiq_hop(RedisBroker(client=client, namespace=f"{prefix}-dq"), hops),
        "streams_hop_ms": dramatiq_hop(
            _streams_broker(bench, f"{prefix}-sq"), hops, worker_timeout=100
        ),
    }


def timed(ops: int, op: Callable[[int], object]) -> float:
    samples = []
    for i in range(ops):
        started = time.perf_counter()
        op(i)
        samples.append(time.perf_counter() - started)
    return median(samples) * 1000


def _streams_broker(bench: Bench, prefix: str) -> StreamsBroker:
    keys = bench.keys(prefix)  # the chain's messages go to the shards of their numbers
    broker = StreamsBroker(bench.client, keys, worker_id="floor", shards=range(keys.shards))
    broker.route(Route("tools", "hop", "floor"))
    return broker


def _lock_pair(locks: RedisLocks, i: int) -> None:
    ask = LockAsk("floor", f"c{i}", f"floor/c{i}/1", {f"kv:{i % 7}": Mode.WRITE})
    reply = locks.enqueue([ask], [None])
    if not reply.grants:
        raise BenchError(f"lock {ask.keys} was not granted")
    locks.release([ask])


def stream_round_trip(bench: Bench, prefix: str, ops: int) -> float:
    """Request on one stream, reply on another, both read with blocking XREAD."""
    req, rep = f"{prefix}:req", f"{prefix}:rep"
    command = [sys.executable, "-m", "tests.bench.floor", "respond", bench.server.url, req, rep]
    responder = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE)
    try:
        assert responder.stdout is not None
        responder.stdout.readline()  # "ready"
        client, last = bench.client, "0-0"
        for _ in range(3):  # warm
            last = _ask(client, req, rep, last)
        samples = []
        for _ in range(ops):
            started = time.perf_counter()
            last = _ask(client, req, rep, last)
            samples.append(time.perf_counter() - started)
        return median(samples) * 1000
    finally:
        responder.kill()
        responder.wait()
        if responder.stdout is not None:
            responder.stdout.close()


def _ask(client: redis.Redis, req: str, rep: str, last: str) -> str:
    client.xadd(req, PAYLOAD, maxlen=1000)  # type: ignore[arg-type]
    reply: Any = client.xread({rep: last}, count=1, block=5000)
    if not reply:
        raise BenchError("the stream responder did not answer")
    return str(reply[0][1][-1][0].decode())


def respond(url: str, req: str, rep: str) -> None:
    client = redis_client(url)
    last = "0-0"  # the request stream is new: every entry is a request
    print("ready", flush=True)
    while True:
        reply: Any = client.xread({req: last}, count=100, block=0)
        for _, entries in reply:
            for entry_id, _fields in entries:
                client.xadd(rep, PAYLOAD, maxlen=1000)  # type: ignore[arg-type]
                last = entry_id.decode()


def dramatiq_hop(broker: dramatiq.Broker, hops: int, worker_timeout: int = 1000) -> float:
    """ms per message of a chain in which each message's actor sends the next."""
    done = threading.Event()

    def hop(i: int) -> None:
        if i < hops:
            chain.send(i + 1)
        else:
            done.set()

    name = next(iter(broker.routes)) if isinstance(broker, StreamsBroker) else "hop"
    chain = dramatiq.actor(hop, broker=broker, queue_name=name, actor_name="hop", max_retries=0)
    worker = dramatiq.Worker(broker, worker_threads=1, worker_timeout=worker_timeout)
    worker.start()
    try:
        chain.send(hops - 5)  # warm: the consumer is up and has polled once
        if not done.wait(30):
            raise BenchError("the warm-up chain did not finish")
        done.clear()
        started = time.perf_counter()
        chain.send(1)
        if not done.wait(120):
            raise BenchError(f"a chain of {hops} dramatiq messages did not finish")
        return (time.perf_counter() - started) / hops * 1000
    finally:
        worker.stop()
        broker.close()


if __name__ == "__main__" and sys.argv[1:2] == ["respond"]:
    respond(*sys.argv[2:5])
