"""The Redis-Streams broker on a real redis-server (the machine's, each test
under its own key prefix): delivery once, hop latency against dramatiq's stock
broker, takeover of a SIGKILLed worker's message and dead-lettering after N
deliveries, dramatiq's middleware (retries, delay, time and age limits,
shutdown), and the CLI running the inventory example on either broker.

Run as a script, this file is a worker process for the kill test."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dramatiq
import pytest
import redis
from dramatiq.brokers.redis import RedisBroker
from dramatiq.message import Message

from services.adapters.broker.streams_broker import StreamsBroker
from services.errors import ConfigError
from services.keys import Keys
from services.settings import from_env

URL = "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(URL, socket_timeout=30)
    yield client
    client.close()


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    prefix = f"t-sb-{uuid.uuid4().hex[:10]}"
    yield prefix
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


@pytest.fixture
def broker(client: redis.Redis, prefix: str) -> StreamsBroker:
    return StreamsBroker(client, Keys(prefix, 8), claim_idle_ms=1000, max_deliveries=2)


@contextmanager
def working(broker: dramatiq.Broker, threads: int = 4) -> Iterator[dramatiq.Worker]:
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(timeout=5000)


def dead_letters(client: redis.Redis, prefix: str, queue: str) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in client.xrange(Keys(prefix, 8).queue_dead(queue))]


def wait_for(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_each_message_sent_is_processed_exactly_once(broker: StreamsBroker) -> None:
    seen: list[int] = []

    @dramatiq.actor(broker=broker, queue_name="once")
    def record(n: int) -> None:
        seen.append(n)

    with working(broker):
        for n in range(50):
            record.send(n)
        broker.join("once", timeout=5000)
        time.sleep(0.3)  # a duplicate would show up by now
    assert sorted(seen) == list(range(50))
    assert broker.stream("once").size() == 0


def test_an_undecodable_message_is_dead_lettered_with_its_bytes_and_work_goes_on(
    client: redis.Redis, prefix: str, broker: StreamsBroker
) -> None:
    seen: list[int] = []

    @dramatiq.actor(broker=broker, queue_name="garbage")
    def record(n: int) -> None:
        seen.append(n)

    with working(broker):
        broker.stream("garbage").push(b"\xffnot json")
        record.send(1)
        broker.join("garbage", timeout=5000)
    assert seen == [1]
    [dead] = dead_letters(client, prefix, "garbage")
    assert (dead[b"reason"], dead[b"m"]) == (b"undecodable", b"\xffnot json")


def chain_hop_ms(broker: dramatiq.Broker, hops: int = 40, reps: int = 3) -> float:
    """Median per-hop time of a chain where each actor sends the next."""
    done = threading.Event()

    @dramatiq.actor(broker=broker, queue_name="chain")
    def chain(n: int) -> None:
        if n:
            chain.send(n - 1)
        else:
            done.set()

    per_hop = []
    with working(broker):
        chain.send(2)  # warm up: connections, scripts, consumer groups
        assert done.wait(5)
        for _ in range(reps):
            done.clear()
            start = time.perf_counter()
            chain.send(hops)
            assert done.wait(10)
            per_hop.append((time.perf_counter() - start) * 1000 / (hops + 1))
    return statistics.median(per_hop)


def test_a_hop_is_much_faster_than_on_the_stock_broker(client: redis.Redis, prefix: str) -> None:
    stock = chain_hop_ms(RedisBroker(client=client, namespace=f"{prefix}:dramatiq"))
    streams = chain_hop_ms(StreamsBroker(client, Keys(prefix, 8)))
    print(f"\nchain hop median: streams {streams:.2f} ms, stock {stock:.2f} ms")
    assert streams < stock / 2


def test_failures_are_retried_by_dramatiq_and_dead_lettered_when_retries_run_out(
    client: redis.Redis, prefix: str, broker: StreamsBroker
) -> None:
    attempts = {"flaky": 0, "doomed": 0}
    opts = {"broker": broker, "queue_name": "retry", "min_backoff": 50, "max_backoff": 100}

    @dramatiq.actor(max_retries=3, **opts)
    def flaky() -> None:
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise ValueError("not yet")

    @dramatiq.actor(max_retries=1, **opts)
    def doomed() -> None:
        attempts["doomed"] += 1
        raise ValueError("never")

    with working(broker):
        flaky.send()
        doomed.send()
        broker.join("retry", timeout=5000)
    assert attempts == {"flaky": 3, "doomed": 2}
    [dead] = dead_letters(client, prefix, "retry")
    assert dead[b"reason"] == b"nack"
    assert Message.decode(dead[b"m"]).actor_name == "doomed"


def test_a_delayed_message_runs_after_its_delay_and_not_before(broker: StreamsBroker) -> None:
    ran_at: list[float] = []

    @dramatiq.actor(broker=broker, queue_name="later")
    def later() -> None:
        ran_at.append(time.monotonic())

    with working(broker):
        sent_at = time.monotonic()
        later.send_with_options(delay=300)
        time.sleep(0.25)
        assert ran_at == []
        assert wait_for(lambda: ran_at, timeout=2)
    assert 0.3 <= ran_at[0] - sent_at < 1.0


def test_time_and_age_limits_end_in_the_dead_letter_stream(
    client: redis.Redis, prefix: str, broker: StreamsBroker
) -> None:
    finished: list[str] = []

    @dramatiq.actor(broker=broker, queue_name="limits", time_limit=200, max_retries=0)
    def slow() -> None:
        for _ in range(300):  # interruptible: the limit is raised between sleeps
            time.sleep(0.01)
        finished.append("slow")

    @dramatiq.actor(broker=broker, queue_name="limits", max_age=50)
    def stale() -> None:
        finished.append("stale")

    broker.emit_after("process_boot")  # starts TimeLimit's watchdog, as dramatiq's CLI does
    with working(broker):
        slow.send()
        stale.send_with_options(delay=150)
        broker.join("limits", timeout=5000)
    assert finished == []
    names = sorted(
        Message.decode(d[b"m"]).actor_name for d in dead_letters(client, prefix, "limits")
    )
    assert names == ["slow", "stale"]


def test_a_shutdown_interrupts_the_actor_and_its_message_runs_again_elsewhere(
    broker: StreamsBroker,
) -> None:
    runs: list[str] = []
    opts = {"notify_shutdown": True, "max_retries": 1, "min_backoff": 10, "max_backoff": 20}

    @dramatiq.actor(broker=broker, queue_name="stopping", **opts)
    def long_job() -> None:
        runs.append("started")
        for _ in range(500 if len(runs) == 1 else 1):  # only the first run is long
            time.sleep(0.01)
        runs.append("finished")

    with working(broker):
        long_job.send()
        assert wait_for(lambda: runs == ["started"])
    assert broker.stream("stopping").size() == 1  # retried, not lost
    with working(broker):
        broker.join("stopping", timeout=10_000)
    assert runs == ["started", "started", "finished"]


def spawn_worker(prefix: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, __file__, URL, prefix]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    return proc


def next_start(client: redis.Redis, prefix: str) -> tuple[int, float]:
    popped = client.blpop([f"{prefix}:started"], timeout=10)
    assert popped is not None, "nobody took the message over"
    pid, at = popped[1].split()
    return int(pid), float(at)


def kill(workers: dict[int, subprocess.Popen[str]], pid: int, prefix: str) -> float:
    """SIGKILL a worker, start a replacement; return when it was killed."""
    workers.pop(pid).send_signal(signal.SIGKILL)
    killed_at = time.time()
    replacement = spawn_worker(prefix)
    workers[replacement.pid] = replacement
    return killed_at


@pytest.mark.slow
def test_a_killed_workers_message_moves_on_within_seconds_and_dies_after_n_kills(
    client: redis.Redis, prefix: str
) -> None:
    sender = StreamsBroker(client, Keys(prefix, 8), claim_idle_ms=1000, max_deliveries=2)
    workers = {p.pid: p for p in (spawn_worker(prefix), spawn_worker(prefix))}
    try:
        assert all(p.stdout and p.stdout.readline().strip() == "ready" for p in workers.values())
        sender.enqueue(
            Message(queue_name="victim", actor_name="hold", args=(), kwargs={}, options={})
        )
        first_pid, _ = next_start(client, prefix)
        # alive and busy past twice the claim idle time, it keeps its message
        assert client.blpop([f"{prefix}:started"], timeout=2.5) is None
        killed_at = kill(workers, first_pid, prefix)
        second_pid, started_at = next_start(client, prefix)
        kill(workers, second_pid, prefix)  # max_deliveries = 2 kills
        assert wait_for(lambda: dead_letters(client, prefix, "victim"), timeout=10)
    finally:
        for proc in workers.values():
            proc.kill()
            proc.wait()
    print(f"\nredelivery after SIGKILL: {started_at - killed_at:.2f} s (claim idle 1.0 s)")
    assert second_pid != first_pid and started_at - killed_at < 3.0
    [dead] = dead_letters(client, prefix, "victim")
    assert (dead[b"reason"], dead[b"deliveries"]) == (b"deliveries", b"3")
    assert "retries" not in Message.decode(dead[b"m"]).options  # kills spent no retries
    assert client.llen(f"{prefix}:started") == 0  # and it never ran a third time


@pytest.mark.parametrize("broker_kind", ["streams", "redis"])
def test_the_inventory_example_completes_on_either_broker(
    client: redis.Redis, prefix: str, broker_kind: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "REDIS_URL": URL,
        "AGENTLEDGER_PREFIX": prefix,
        "AGENTLEDGER_BROKER": broker_kind,
        "AGENTLEDGER_STATE_DIR": str(tmp_path),
    }
    args = [
        sys.executable,
        "-m",
        "services.entrypoints.cli.main",
        "run",
        "examples/inventory/spec.yaml",
    ]
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": completed" in done.stdout


def test_an_unknown_broker_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError) as raised:
        from_env({"AGENTLEDGER_BROKER": "kafka"})
    assert raised.value.name == "AGENTLEDGER_BROKER"


def _victim_worker(url: str, prefix: str) -> None:
    """A worker process whose `hold` actor records its start and then hangs."""
    client = redis.Redis.from_url(url, socket_timeout=30)
    broker = StreamsBroker(client, Keys(prefix, 8), claim_idle_ms=1000, max_deliveries=2)

    @dramatiq.actor(broker=broker, queue_name="victim", actor_name="hold")
    def hold() -> None:
        client.rpush(f"{prefix}:started", f"{os.getpid()} {time.time()}")
        time.sleep(60)

    dramatiq.Worker(broker, worker_threads=2, worker_timeout=100).start()
    print("ready", flush=True)
    time.sleep(120)


if __name__ == "__main__":
    _victim_worker(*sys.argv[1:3])
