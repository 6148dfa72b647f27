"""The benchmark's harness: a private redis-server with AOF, worker processes
(`tests.bench.counted_worker`) that report the Redis commands they send and
the CPU they use, and a follower of the shard feeds that says when each run
ended. Every workload runs under a key prefix of its own."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.publishers import GrantedPrincipal
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.client import is_cluster, redis_client
from agentledger.services.adapters.redis.local_server import PrivateRedis, start_server
from agentledger.services.adapters.redis.slot_reads import read_each
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.keys import Keys, keys_for
from agentledger.services.settings import Settings, environ_for_children

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = b"agentledger workers up"
INTAKE_READY = b"agentledger intake up"
SETTLE_S = 0.15  # the workers write their counts every 50 ms
ENDINGS = frozenset(
    {"RunCompleted", "RunFailed", "RunBudgetExhausted", "RunEscalated", "RunTimedOut"}
    | {"RunCancelled", "RunAborted"}
)
DURABILITY = {"everysec": "Redis AOF everysec", "always": "Redis AOF always"}


POOLS = ("model", "tools", "accept")  # the pools a worker's CPU is split by


BENCH_PUBLISHER = "bench"


class BenchError(Exception):
    """A measurement could not be taken (a run did not end, or ended wrong)."""


@dataclass
class Cost:
    """What worker processes (and the Redis server) spent over a stretch of time."""

    cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    round_trips: int = 0
    commands: Counter[str] = field(default_factory=Counter)
    pool_cpu_s: Counter[str] = field(default_factory=Counter)
    messages: int = 0

    def __sub__(self, other: Cost) -> Cost:
        commands = Counter(self.commands)
        commands.subtract(other.commands)
        pools = Counter(self.pool_cpu_s)
        pools.subtract(other.pool_cpu_s)
        return Cost(
            self.cpu_s - other.cpu_s,
            self.redis_cpu_s - other.redis_cpu_s,
            self.round_trips - other.round_trips,
            +commands,
            pools,
            self.messages - other.messages,
        )

    def per(self, n: int) -> dict[str, Any]:
        pools = {f"cpu_ms_{p}": self.pool_cpu_s.get(p, 0.0) * 1000 / n for p in POOLS}
        pools["cpu_ms_other"] = self.cpu_s * 1000 / n - sum(pools.values())
        return {
            **pools,
            "cpu_ms": self.cpu_s * 1000 / n,
            "redis_cpu_ms": self.redis_cpu_s * 1000 / n,
            "round_trips": self.round_trips / n,
            "messages": self.messages / n,
            "commands": sum(self.commands.values()) / n,
            "by_command": {k: round(v / n, 2) for k, v in self.commands.most_common()},
        }


@dataclass
class Pool:
    """Worker processes on one prefix."""

    keys: Keys
    procs: list[subprocess.Popen[bytes]]
    count_files: list[Path]
    client: redis.Redis

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def cost(self) -> Cost:
        time.sleep(SETTLE_S)
        total = Cost(redis_cpu_s=_redis_cpu_s(self.client))
        for path in self.count_files:
            if path.exists():
                counts = json.loads(path.read_text())
                total.cpu_s += counts["cpu_s"]
                total.round_trips += counts["round_trips"]
                total.commands.update(counts["commands"])
                total.pool_cpu_s.update(counts.get("pool_cpu_s", {}))
                total.messages += counts.get("messages", 0)
        return total


@dataclass
class Bench:
    """One private Redis and the settings the workers get."""

    server: PrivateRedis | Any  # anything with the `url` of the Redis (a local cluster)
    client: redis.Redis
    settings: Settings
    log_dir: Path
    fsync: str

    @property
    def durability(self) -> str:
        return DURABILITY[self.fsync]

    def keys(self, prefix: str) -> Keys:
        return keys_for(self.settings.with_(prefix=prefix))

    @property
    def signer(self) -> Signer:
        """The bench's publisher (every principal, scope and queue), filed on first use."""
        path = self.settings.publishers_path
        if BENCH_PUBLISHER not in publishers_file.read(path).publishers:
            everyone = [GrantedPrincipal(id="*", tenant="*")]
            publishers_file.add(
                path, BENCH_PUBLISHER, principals=everyone, scopes=["*"], queues=["*"]
            )
        return publishers_file.signer(path, BENCH_PUBLISHER)

    def store(self, prefix: str) -> RedisEventStore:
        return RedisEventStore(self.client, self.keys(prefix))

    @contextmanager
    def workers(self, prefix: str, count: int, extra: Sequence[str] = ()) -> Iterator[Pool]:
        """`count` worker processes on `prefix`, and the intake beside them (counted
        too: its work was the workers' before it was a role of its own; never killed),
        ready on entry, stopped on exit; `extra`: more options of `agentledger
        workers` (`--metrics-port 0`)."""
        assert self.signer  # filed before the intake reads the file (its digest is agreed then)
        env = environ_for_children(self.settings.with_(prefix=prefix))
        procs: list[subprocess.Popen[bytes]] = []
        logs, counts = (
            [self.log_dir / f"{prefix}-intake.log"],
            [self.log_dir / f"{prefix}-intake.counts.json"],
        )
        intake = _counted(counts[0], logs[0], ["intake"], env)
        try:
            _await_ready(intake, timeout_s=60, ready=INTAKE_READY)
            for i in range(count):
                logs.append(self.log_dir / f"{prefix}-{i}.log")
                counts.append(self.log_dir / f"{prefix}-{i}.counts.json")
                with logs[-1].open("wb") as err:
                    procs.append(
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "tests.bench.counted_worker",
                                str(counts[-1]),
                                *(_workers_command(extra) if extra else []),
                            ],
                            env=env,
                            cwd=REPO_ROOT,
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE,
                            stderr=err,
                        )  # fmt: skip
                    )
            for proc in procs:
                _await_ready(proc, timeout_s=60)
            yield Pool(self.keys(prefix), procs, counts, self.client)
        except BenchError as exc:
            raise BenchError(f"{exc}\n{_tails(logs)}") from None
        finally:
            stop([*procs, intake])


def _counted(
    counts: Path, log: Path, command: list[str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.bench.counted_worker", str(counts), *command],
            env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip


def _workers_command(extra: Sequence[str]) -> list[str]:
    from tests.bench.plan import QUEUE, TOOLS_DIR, TOOLS_MODULE

    return ["workers", "--tools", TOOLS_MODULE, "--tool-path", TOOLS_DIR, "--queue", QUEUE, *extra]


@contextmanager
def private_bench(settings: Settings, tmp: Path, fsync: str) -> Iterator[Bench]:
    server = start_server(tmp / f"redis-{fsync}", fsync=fsync)
    client = redis_client(server.url)
    try:
        own = settings.with_(redis_url=server.url, publishers_file=str(tmp / "publishers.yaml"))
        yield Bench(server, client, own, tmp, fsync)
    finally:
        client.close()
        server.stop()


class Follower:
    """Tails the shard feeds of a prefix from now on; says when watched runs end."""

    def __init__(self, client: redis.Redis, keys: Keys, signer: Signer):
        self._r = client
        self._signer = signer
        self._store = RedisEventStore(client, keys)
        self._cursors: dict[Any, Any] = {}
        for shard in range(keys.shards):
            last: Any = client.xrevrange(keys.feed(shard), count=1)
            self._cursors[keys.feed(shard)] = last[0][0].decode() if last else "0-0"
        self.ended: dict[str, float] = {}  # run id -> `at` of its ending event

    def submit(self, keys: Keys, requests: list[RunRequested]) -> dict[str, float]:
        published = {}
        for request in requests:
            publish(self._r, keys, request, signer=self._signer)
            published[str(request.run_id)] = time.time()
        return published

    def wait(self, run_ids: set[str] | list[str], timeout_s: float) -> dict[str, float]:
        """Until every run has ended (completed: anything else is an error)."""
        waiting = set(run_ids) - self.ended.keys()
        deadline = time.monotonic() + timeout_s
        while waiting:
            if time.monotonic() > deadline:
                raise BenchError(f"{len(waiting)} runs not ended after {timeout_s:g}s")
            reply = read_each(self._r, self._cursors, count=1000, block_ms=200)
            for stream, entries in reply:
                self._cursors[stream.decode()] = entries[-1][0].decode()
                for _, fields in entries:
                    if fields[b"type"].decode() in ENDINGS:
                        self._ended(fields[b"run"].decode(), int(fields[b"seq"]))
            waiting -= self.ended.keys()
        return {r: self.ended[r] for r in run_ids}

    def _ended(self, run_id: str, seq: int) -> None:
        [last] = self._store.read(run_id, after_seq=seq - 1)[:1]
        if last.type != "RunCompleted":
            raise BenchError(f"run {run_id!r} ended with {last.type}: {last.data!r}")
        self.ended[run_id] = last.at


def _redis_cpu_s(client: redis.Redis) -> float:
    """The server's CPU time; a cluster's: its masters' together."""
    if is_cluster(client):
        found: Any = client.info("cpu", target_nodes="primaries")  # type: ignore[call-arg]
        per_node = (
            found.values() if isinstance(found, dict) and "used_cpu_sys" not in found else [found]
        )
        return sum(float(c["used_cpu_sys"]) + float(c["used_cpu_user"]) for c in per_node)
    cpu: Any = client.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def _await_ready(proc: subprocess.Popen[bytes], *, timeout_s: float, ready: bytes = READY) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        readable, _, _ = select.select([proc.stdout], [], [], 0.2)
        if readable:
            line = proc.stdout.readline()
            if line.startswith(ready):
                return
            if not line and proc.poll() is not None:
                break
    raise BenchError(f"worker process {proc.pid} did not come up (exit {proc.poll()})")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (the pools drain and exit), SIGKILL after 20 s or when interrupted."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    try:
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def _tails(logs: list[Path]) -> str:
    return "\n".join(
        f"--- {log.name}:\n{log.read_text(errors='replace')[-1500:]}"
        for log in logs
        if log.exists()
    )
