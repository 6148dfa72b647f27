"""The chaos suite's harness: a private redis-server with AOF on a free port
(killed, stopped and restarted at will, never the shared 6379), `agentledger
workers --processes N` as an operator starts them (their children killed at
random) and the `agentledger intake` beside them (the workers run none), the
tools' own ground truth (one line per real execution of a write, in the run's
workspace: the intake's copy), and the one function that writes inbox entries
(into the chaos publisher's own streams)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis

from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.publishers import GrantedPrincipal
from agentledger.schemas.signature import sign
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.inbox.publishing import stamped
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.adapters.redis.local_server import PrivateRedis, free_port, start_server
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.keys import Keys, keys_for
from agentledger.services.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
QUEUE = "chaos"
TOOL_MODULE = "chaos_tools"
TRUTH = "truth.log"
T = TypeVar("T")

TOOL_SOURCE = '''"""Tools of the chaos suite. A write appends one line to truth.log in the run's
workspace when it really happens: side effects are counted here, at the tool's
side, never from the event log. Its lookup reads the same file."""

import fcntl
import json
import os
import time
from pathlib import Path

from agentledger import Lookup, ToolContext, ToolFailure, tool


def _truth(ctx):
    return Path(ctx.workspace, "truth.log")


def _did(ctx, result):
    line = f"{ctx.op_key} {ctx.call_id} {os.getpid()} {json.dumps(result)}\\n"
    with open(_truth(ctx), "a") as f:  # one write(2) of one short line: atomic
        f.write(line)


def lookup_write(op_key, args, ctx):
    """Asks the ground truth itself whether the write happened."""
    path = _truth(ctx)
    for line in path.read_text().splitlines() if path.exists() else ():
        key, _call, _pid, result = line.split(" ", 3)
        if key == op_key:
            return Lookup(done=True, result=json.loads(result))
    return Lookup(done=False)


@tool(read_only=True, reads=lambda a, ws: [f"kv:{ws}#{a['key']}"], timeout_s=3)
def chaos_read(key: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """Read a key."""
    time.sleep(delay_s)
    return {"key": key, "value": "v"}


@tool(writes=lambda a, ws: [f"kv:{ws}#{a['key']}"], lookup=lookup_write, timeout_s=3)
def chaos_write(key: str, value: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """Write a key (after `delay_s`: where a kill lands)."""
    time.sleep(delay_s)
    result = {"key": key, "value": value}
    _did(ctx, result)
    return result


@tool(writes=lambda a, ws: [f"kv:{ws}#{a['key']}"], timeout_s=10)
def chaos_blind_write(key: str, value: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """A write with no lookup: an outcome this worker loses goes to a human."""
    time.sleep(delay_s)
    result = {"key": key, "value": value}
    _did(ctx, result)
    return result


@tool(writes=lambda a: [f"shared:{a['key']}"], lookup=lookup_write, timeout_s=20)
def chaos_fenced_write(key: str, store: str, ctx: ToolContext, delay_s: float = 0.0) -> dict:
    """Write a key shared by every run into `store`, refusing a fencing token older
    than the newest one the store has seen (a holder that lost its lease)."""
    time.sleep(delay_s)
    token = int(ctx.tokens[f"shared:{key}"])
    with open(store + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        seen = json.loads(Path(store).read_text()) if Path(store).exists() else {}
        newest = seen.get(key, {}).get("token", 0)
        if token < newest:
            with open(store + ".fenced", "a") as f:
                f.write(f"{ctx.run_id} {token} {newest}\\n")
            raise ToolFailure(f"fenced: token {token} is older than {newest}", retryable=False)
        seen[key] = {"token": token, "by": ctx.run_id}
        Path(store).write_text(json.dumps(seen))
    result = {"key": key, "token": token}
    _did(ctx, result)
    return result
'''


def write_tool_module(folder: Path, source: str = TOOL_SOURCE, name: str = TOOL_MODULE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    return folder


# the publisher the scenario's cluster filed: its valid entries are signed with it
_signer: Signer | None = None


def inbox_fields(message: str | bytes) -> dict[str, str | bytes]:
    """The fields of one inbox entry carrying `message`, signed as the chaos
    publisher of the cluster in use (the one place that says how an entry is made)."""
    assert _signer is not None, "inbox entries are written inside `cluster()`"
    data = message if isinstance(message, bytes) else message.encode()
    return {"message": message, "publisher": _signer.name, "signature": sign(_signer.key, data)}


def partition_of(keys: Keys, request_id: str) -> int:
    """The inbox partition a publisher writes a request to (as `intake.publish`
    does): one request id, one partition, so its entries keep their order."""
    return int(hashlib.sha256(request_id.encode()).hexdigest(), 16) % keys.inbox_partitions


def write_inbox(client: redis.Redis, keys: Keys, part: int, message: str | bytes) -> None:
    write_fields(client, keys, part, inbox_fields(message))


def write_fields(
    client: redis.Redis, keys: Keys, part: int, fields: dict[str, str | bytes]
) -> None:
    """Any fields, into the chaos publisher's stream of a partition (all it may write)."""
    assert _signer is not None, "inbox entries are written inside `cluster()`"
    client.xadd(keys.inbox(part % keys.inbox_partitions, _signer.name), fields)  # type: ignore[arg-type]


def submit(client: redis.Redis, keys: Keys, request: RunRequested, part: int | None = None) -> None:
    where = partition_of(keys, request.request_id or request.run_id or "") if part is None else part
    write_inbox(client, keys, where, stamped(request).model_dump_json())  # as `publish` signs it


def spec(turns: list[dict[str, Any]], tools_dir: Path, *, tools: str = TOOL_MODULE) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "chaos run",
            "tools": [tools],
            "tool_path": [str(tools_dir)],
            "principal": {"id": "chaos", "tenant": "chaos"},
            "budgets": {"max_turns": 8},
            "model": {"scripted": turns},
        }
    )


def use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "input": args}


def retrying(what: Callable[[], T], *, timeout_s: float = 60.0) -> T:
    """`what()`, again while Redis is away (the harness reads through outages too)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return what()
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@dataclass
class Redis:
    """A private redis-server that can be killed, stopped and started again on
    the same port from its AOF."""

    data_dir: Path
    fsync: str = "everysec"
    port: int = field(default_factory=free_port)
    server: PrivateRedis | None = None

    def start(self) -> Redis:
        self.server = start_server(self.data_dir, port=self.port, fsync=self.fsync)
        return self

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.server is not None
        return self.server.process.pid

    def kill(self) -> None:
        assert self.server is not None
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.wait()

    def pause(self, seconds: float) -> None:
        """SIGSTOP for `seconds`, then SIGCONT: clients hang, nothing is refused."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@dataclass
class Pool:
    """One `agentledger workers --processes N` (a supervisor and its children)."""

    proc: subprocess.Popen[bytes]
    log: Path

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            return []

    def ready(
        self, processes: int, timeout_s: float = 120.0, *, up: bytes = b"agentledger workers up"
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while self.log.read_bytes().count(up) < processes:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"workers did not start:\n{self.tail()}")
            time.sleep(0.1)

    def restarts(self) -> int:
        return self.log.read_bytes().count(b"ended (signal")

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Cluster:
    """One private Redis, one key prefix, and the worker pools started on it."""

    redis: Redis
    tmp: Path
    prefix: str
    overrides: dict[str, str] = field(default_factory=dict)
    pools: list[Pool] = field(default_factory=list)
    intake: Pool | None = None  # `agentledger intake`, started with the first workers

    @property
    def settings(self) -> Settings:
        return Settings(redis_url=self.redis.url, prefix=self.prefix, probe_url=None)

    @property
    def keys(self) -> Keys:
        return keys_for(self.settings)

    def client(self) -> redis.Redis:
        return redis_client(self.redis.url)

    def copy_of(self, run_id: str) -> Path:
        """Where a run works: the intake's copy of the workspace it asked for."""
        return self.tmp / "state" / "workspaces" / run_id

    def store(self, client: redis.Redis) -> RedisEventStore:
        return RedisEventStore(client, self.keys)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
        env.update(
            REDIS_URL=self.redis.url,
            AGENTLEDGER_PREFIX=self.prefix,
            AGENTLEDGER_PROBE_URL="off",
            AGENTLEDGER_STATE_DIR=str(self.tmp / "state"),
            AGENTLEDGER_LEASE_S="1",
            AGENTLEDGER_SWEEP_INTERVAL_S="0.25",
            AGENTLEDGER_MEMBER_TTL_S="1",
            AGENTLEDGER_BROKER_CLAIM_IDLE_S="1",
            AGENTLEDGER_LOCK_LEASE_S="2",
            AGENTLEDGER_WORKER_THREADS="4",
            AGENTLEDGER_SANDBOX="off",  # Python tools only: no command runs
            PYTHONUNBUFFERED="1",
            PYTHONPATH=os.pathsep.join(
                [str(REPO_ROOT / ".pkg"), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
            ),
        )
        env.update(self.overrides)
        return env

    def workers(
        self,
        tools_dir: Path,
        *,
        processes: int,
        queue: str = QUEUE,
        module: str = TOOL_MODULE,
        wait: bool = True,
    ) -> Pool:
        log = self.tmp / f"workers-{len(self.pools) + 1}.log"
        args = [
            sys.executable, "-m", "agentledger.services.entrypoints.cli.main", "workers",
            "--tools", module, "--tool-path", str(tools_dir), "--queue", queue,
            "--processes", str(processes),
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(
                args, env=self.env(), cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        pool = Pool(proc, log)
        self.pools.append(pool)
        if wait:
            pool.ready(processes)  # each process says "workers up" once its pools serve
            self.start_intake()  # after: a request it reads names a tool set they registered
        return pool

    def start_intake(self) -> Pool:
        """The one intake of the cluster, started once, once workers are up (no tool
        code: never killed here)."""
        if self.intake is None:
            log = self.tmp / "intake.log"
            command = [sys.executable, "-m", "agentledger.services.entrypoints.cli.main", "intake"]
            with log.open("wb") as out:
                proc = subprocess.Popen(command, env=self.env(), cwd=self.tmp, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
            self.intake = Pool(proc, log)
            self.intake.ready(1, up=b"agentledger intake up")
        return self.intake

    def logs(self) -> str:
        return "\n".join(f"--- {p.log.name}:\n{p.tail()}" for p in self.everyone())

    def everyone(self) -> list[Pool]:
        return [*self.pools, *([self.intake] if self.intake is not None else [])]

    def stop(self) -> None:
        for pool in self.everyone():
            pool.terminate()  # all at once: they stop side by side
        for pool in self.everyone():
            pool.stop()


@contextmanager
def cluster(
    tmp: Path, name: str, *, fsync: str = "everysec", **overrides: str
) -> Iterator[Cluster]:
    tmp = tmp / name
    tmp.mkdir(parents=True, exist_ok=True)
    server = Redis(tmp / "redis", fsync=fsync).start()
    c = Cluster(server, tmp, f"chaos-{name}", dict(overrides))
    global _signer
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    publishers = str(tmp / "state" / "publishers.yaml")  # where the pools read it (the state dir)
    anyone = [GrantedPrincipal(id="*", tenant="*")]
    key = publishers_file.add(
        publishers, "chaos", principals=anyone, scopes=["*"], queues=["*"],
        workspaces=[str(tmp / "ws")],  # each run asks for tmp/ws/<run id>; it works in a copy
    )  # fmt: skip
    _signer = Signer("chaos", key)
    try:
        yield c
    finally:
        c.stop()
        server.stop()
