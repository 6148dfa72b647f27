"""`make bench` (`python -m services.bench [--quick]`): what the orchestration
costs. It measures the overhead per tool call of one long scripted run and how
a turn's time grows along it, runs per second with one and two worker
processes, and the Redis floor (PING, XADD, the store's Lua append) the rest can
be read against. Everything runs on a private redis-server the bench starts
with AOF, each measurement under its own key prefix, with the worker pools as
`agentledger workers` subprocesses. The figures are medians of repetitions,
printed as a table and written to bench-results/bench.json. A benchmark, not a
test: the numbers move with whatever else the machine is doing."""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

import dramatiq
import redis

from events.fold import apply
from events.state import RunState
from events.status import RunStatus
from events.types import ToolCallSucceeded
from schemas.inbox import RunRequested
from schemas.spec import Budgets, Principal, RunSpec, ScriptedCall, ScriptedModel, ScriptedTurn
from services.bootstrap import redis_client
from services.clock import new_run_id
from services.errors import ConfigError, RedisUnavailable
from services.intake import publish
from services.keys import Keys
from services.redis_server import start_server
from services.settings import BROKERS, Settings, environ_for_children, from_env
from services.steps import envelopes
from services.store.redis_store import RedisEventStore

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = Path("bench-results", "bench.json")
TOOLS_MODULE = "services.bench_tools"  # registers `bench_noop`
WINDOW = 20  # calls at each end of the long run compared for growth
READY = b"agentledger workers up"
Raw = dict[str, list[dict[str, Any]]]  # measurement -> one result per repetition
BROKER_NAMES = {
    "streams": "broker: ours on Redis streams (blocking XREADGROUP)",
    "redis": f"broker: dramatiq {dramatiq.__version__} stock RedisBroker (polling)",
}


@dataclass(frozen=True)
class Plan:
    calls: int  # tool calls in the long run
    runs: int  # one-call runs submitted at once
    reps: int
    floor_ops: int
    processes: tuple[int, ...] = (1, 2)


PLANS = {"default": Plan(calls=200, runs=50, reps=3, floor_ops=2000), "quick": Plan(40, 20, 3, 500)}


class BenchError(Exception):
    """A measurement could not be taken (a run did not end, or ended wrong)."""


def bench_spec(calls: int) -> RunSpec:
    """The scripted agent: `calls` turns of one no-op call each, then end_turn; no checks."""
    turns = [
        ScriptedTurn(tool_use=(ScriptedCall(id=f"c{i}", name="bench_noop", input={"n": i}),))
        for i in range(1, calls + 1)
    ]
    return RunSpec(
        task=f"call bench_noop {calls} times",
        tools=(TOOLS_MODULE,),
        principal=Principal(id="bench", tenant="bench"),
        budgets=Budgets(max_turns=calls + 1),
        model=ScriptedModel(scripted=(*turns, ScriptedTurn(end_turn="done"))),
    )


@dataclass
class Bench:
    """One private Redis, the settings the workers get, and where their logs go."""

    client: redis.Redis
    settings: Settings
    log_dir: Path

    def keys(self, prefix: str) -> Keys:
        return Keys(prefix, self.settings.shards)

    @contextmanager
    def workers(self, prefix: str, count: int) -> Iterator[Keys]:
        """`count` worker processes on `prefix`, ready (groups made, pools started) on entry."""
        env = environ_for_children(self.settings.with_(prefix=prefix))
        command = [sys.executable, "-m", "services.cli.main", "workers"]
        children: list[tuple[subprocess.Popen[bytes], Path]] = []
        try:
            for i in range(count):
                log = self.log_dir / f"{prefix}-{i}.log"
                with log.open("wb") as err:
                    child = subprocess.Popen(
                        command,
                        env=env,
                        cwd=REPO_ROOT,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=err,
                    )
                children.append((child, log))
            for child, log in children:
                _await_ready(child, log, timeout_s=60)
            yield self.keys(prefix)
        except BenchError as exc:
            raise BenchError(f"{exc}\n{_tails([log for _, log in children])}") from None
        finally:
            _stop([child for child, _ in children])

    def run_all(self, keys: Keys, requests: list[RunRequested], timeout_s: float) -> dict[str, Any]:
        """Publish the requests at once; when each was published and when it ended."""
        cursors = _feed_cursors(self.client, keys)
        published: dict[str, float] = {}
        for request in requests:
            publish(self.client, keys, request)
            published[str(request.run_id)] = time.time()
        ended = _await_endings(self.client, keys, cursors, set(published), timeout_s)
        return {"published": published, "ended": ended}

    def warm_up(self, keys: Keys, count: int) -> None:
        """A few one-call runs first, so imports and first connections are not measured."""
        self.run_all(keys, [_request(bench_spec(1)) for _ in range(count)], timeout_s=60)


def _request(spec: RunSpec) -> RunRequested:
    run_id = new_run_id()
    return RunRequested(run_id=run_id, request_id=run_id, spec=spec)


def _await_ready(child: subprocess.Popen[bytes], log: Path, *, timeout_s: float) -> None:
    assert child.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        readable, _, _ = select.select([child.stdout], [], [], 0.2)
        if readable:
            line = child.stdout.readline()
            if line.startswith(READY):
                return
            if not line and child.poll() is not None:
                break
    raise BenchError(f"worker process {child.pid} did not come up (exit {child.poll()})")


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (the pools drain and exit), SIGKILL after 20 s or when interrupted meanwhile."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    try:
        for child in children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()


def _tails(logs: list[Path]) -> str:
    return "\n".join(
        f"--- {log.name}:\n{log.read_text(errors='replace')[-1500:]}"
        for log in logs
        if log.exists()
    )


def _feed_cursors(client: redis.Redis, keys: Keys) -> dict[Any, Any]:
    """Where each shard feed ends now: only entries after these belong to what is published next."""
    cursors = {}
    for shard in range(keys.shards):
        last: Any = client.xrevrange(keys.feed(shard), count=1)
        cursors[keys.feed(shard)] = last[0][0].decode() if last else "0-0"
    return cursors


def _await_endings(
    client: redis.Redis, keys: Keys, cursors: dict[Any, Any], run_ids: set[str], timeout_s: float
) -> dict[str, float]:
    """Tail the shard feeds, folding each watched run as it moves, until every run has left
    the live states; when each did (the `at` of that event). Only COMPLETED is accepted."""
    store = RedisEventStore(client, keys)
    states: dict[str, RunState | None] = dict.fromkeys(run_ids)
    ended: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(ended) < len(run_ids):
        if time.monotonic() > deadline:
            missing = len(run_ids) - len(ended)
            raise BenchError(f"{missing} of {len(run_ids)} runs not ended after {timeout_s:g}s")
        reply: Any = client.xread(cursors, count=1000, block=500)
        moved: dict[str, None] = {}
        for stream, entries in reply or []:
            cursors[stream.decode()] = entries[-1][0].decode()
            moved.update(dict.fromkeys(fields[b"run"].decode() for _, fields in entries))
        for run_id in moved.keys() & states.keys() - ended.keys():
            state = states[run_id]
            for env in store.read(run_id, after_seq=state.seq if state else 0):
                state = apply(state, env)
                if not state.status.live:
                    ended[run_id] = env.at
                    if state.status is not RunStatus.COMPLETED:
                        raise BenchError(f"run {run_id!r} ended {state.status}: {state.detail}")
                    break
            states[run_id] = state
    return ended


def measure_floor(bench: Bench, prefix: str, ops: int) -> dict[str, float]:
    """Median round trips (ms): PING, a raw XADD, and the store's Lua append of one event."""
    client, keys = bench.client, bench.keys(prefix)
    store = RedisEventStore(client, keys)
    event = ToolCallSucceeded(call_id="c1", output={"n": 1}, started_at=0.0, finished_at=0.0)
    batches = [
        envelopes("floor", [event], after_seq=i, at=time.time(), source="bench") for i in range(ops)
    ]
    payload = {"e": b"x" * 100}
    return {
        "ping_ms": _timed(ops, lambda i: client.ping()),
        "xadd_ms": _timed(ops, lambda i: client.xadd(f"{prefix}:floor:xadd", payload)),  # type: ignore[arg-type]
        "append_ms": _timed(
            ops, lambda i: store.append("floor", batches[i], expected_seq=i, live=True)
        ),
    }


def _timed(ops: int, op: Callable[[int], object]) -> float:
    samples = []
    for i in range(ops):
        started = time.perf_counter()
        op(i)
        samples.append(time.perf_counter() - started)
    return median(samples) * 1000


def measure_long_run(bench: Bench, prefix: str, calls: int) -> dict[str, Any]:
    """One run of `calls` sequential tool calls on one worker process."""
    request = _request(bench_spec(calls))
    run_id = str(request.run_id)
    with bench.workers(prefix, 1) as keys:
        bench.warm_up(keys, 2)
        done = bench.run_all(keys, [request], timeout_s=60 + 3 * calls)
    wall_s = done["ended"][run_id] - done["published"][run_id]
    log = RedisEventStore(bench.client, keys).read(run_id)
    marks = [log[0].at] + [e.at for e in log if e.type == "ToolCallSucceeded"]
    if len(marks) != calls + 1:
        raise BenchError(f"run {run_id!r} has {len(marks) - 1} successful calls, not {calls}")
    turns = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    first, last = median(turns[:WINDOW]) * 1000, median(turns[-WINDOW:]) * 1000
    return {
        "wall_s": wall_s,
        "ms_per_call": wall_s / calls * 1000,
        "first_turns_ms": first,
        "last_turns_ms": last,
        "growth": last / first,
        "events": len(log),
        "turn_ms": [round(t * 1000, 2) for t in turns],
    }


def measure_throughput(bench: Bench, prefix: str, runs: int, processes: int) -> dict[str, float]:
    """`runs` one-call runs submitted at once to `processes` worker processes."""
    requests = [_request(bench_spec(1)) for _ in range(runs)]
    with bench.workers(prefix, processes) as keys:
        bench.warm_up(keys, 2 * processes)
        done = bench.run_all(keys, requests, timeout_s=60 + runs)
    ended, published = done["ended"], done["published"]
    wall_s = max(ended.values()) - min(published.values())
    latencies = [ended[r] - published[r] for r in published]
    return {
        "wall_s": wall_s,
        "runs_per_s": runs / wall_s,
        "run_latency_ms": median(latencies) * 1000,
    }


def measure(bench: Bench, plan: Plan, tag: str) -> Raw:
    """Every measurement once per repetition, side by side, each under a fresh prefix."""
    raw: Raw = {"floor": [], "long_run": []}
    raw.update({f"throughput_{p}p": [] for p in plan.processes})
    for rep in range(1, plan.reps + 1):
        base = f"{tag}-r{rep}"
        raw["floor"].append(measure_floor(bench, f"{base}-floor", plan.floor_ops))
        raw["long_run"].append(measure_long_run(bench, f"{base}-long", plan.calls))
        for p in plan.processes:
            raw[f"throughput_{p}p"].append(measure_throughput(bench, f"{base}-{p}p", plan.runs, p))
        long_run = raw["long_run"][-1]
        rates = ", ".join(
            f"{p}p {raw[f'throughput_{p}p'][-1]['runs_per_s']:.1f}" for p in plan.processes
        )
        print(
            f"  rep {rep}/{plan.reps}: {long_run['ms_per_call']:.1f} ms/call, "
            f"growth x{long_run['growth']:.2f}, runs/s {rates}",
            file=sys.stderr,
            flush=True,
        )
    return raw


def summarize(raw: Raw, plan: Plan) -> list[dict[str, Any]]:
    """Table rows: the median of each figure over the repetitions, with every value."""
    n, m, floor, long_run = plan.calls, plan.runs, raw["floor"], raw["long_run"]
    rows: list[tuple[str, str, list[float]]] = [
        ("floor: PING round trip", "ms", _col(floor, "ping_ms")),
        ("floor: XADD round trip (100 B)", "ms", _col(floor, "xadd_ms")),
        ("floor: store append (Lua, 1 event)", "ms", _col(floor, "append_ms")),
        (f"tool call overhead, 1 run x {n} calls", "ms/call", _col(long_run, "ms_per_call")),
        (f"turn time, calls 1-{WINDOW}", "ms", _col(long_run, "first_turns_ms")),
        (f"turn time, calls {n - WINDOW + 1}-{n}", "ms", _col(long_run, "last_turns_ms")),
        (f"growth, last {WINDOW} / first {WINDOW}", "ratio", _col(long_run, "growth")),
    ]
    for p in plan.processes:
        runs, label = raw[f"throughput_{p}p"], f"{p} process{'es' if p > 1 else ''}"
        rows.append((f"{m} runs x 1 call, {label}", "runs/s", _col(runs, "runs_per_s")))
        rows.append((f"  median run latency, {label}", "ms", _col(runs, "run_latency_ms")))
    if len(plan.processes) == 2:
        one, two = (_col(raw[f"throughput_{p}p"], "runs_per_s") for p in plan.processes)
        scaling = [b / a for a, b in zip(one, two, strict=True)]
        rows.append((f"scaling, {plan.processes[1]} processes / 1", "ratio", scaling))
    xadd = median(_col(floor, "xadd_ms"))
    return [
        {
            "measure": name,
            "unit": unit,
            "median": median(values),
            "values": values,
            "x_xadd": median(values) / xadd if unit.startswith("ms") else None,
        }
        for name, unit, values in rows
    ]


def _col(rows: list[dict[str, Any]], key: str) -> list[float]:
    return [row[key] for row in rows]


def print_table(rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    print(
        f"\nagentledger bench: {meta['reps']} repetitions, medians; {meta['redis']} "
        f"({meta['durability']});\n{meta['broker']}; {meta['worker_threads']} worker threads "
        "per process"
    )
    w = max(len(row["measure"]) for row in rows)
    print(f"{'measure':<{w}}  {'durability':<24} {'median':>8} {'unit':<8} {'x XADD':>7}  values")
    for row in rows:
        ratio = _num(row["x_xadd"]) if row["x_xadd"] is not None else ""
        values = " ".join(_num(v) for v in row["values"])
        print(
            f"{row['measure']:<{w}}  {row['durability']:<24} {_num(row['median']):>8} "
            f"{row['unit']:<8} {ratio:>7}  {values}"
        )


def _num(value: float) -> str:
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m services.bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smaller: 40 calls, 20 runs")
    p.add_argument("--calls", type=int, help="tool calls in the long run")
    p.add_argument("--runs", type=int, help="one-call runs submitted at once")
    p.add_argument("--reps", type=int, help="repetitions (at least 3 for a median worth quoting)")
    p.add_argument("--fsync", choices=("everysec", "always"), default="everysec")
    p.add_argument("--broker", choices=sorted(BROKERS), help="default: AGENTLEDGER_BROKER")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    plan = PLANS["quick" if args.quick else "default"]
    changes = {k: getattr(args, k) for k in ("calls", "runs", "reps") if getattr(args, k)}
    plan = replace(plan, **changes)
    if plan.calls < WINDOW:
        p.error(f"--calls must be at least {WINDOW}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally blocks run
    started = time.monotonic()
    try:
        settings = from_env()
        settings = settings.with_(broker=args.broker or settings.broker)
        raw, meta = collect(plan, settings, args.fsync)
    except (BenchError, ConfigError, RedisUnavailable) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    rows = [
        {**row, "durability": meta["durability"], "broker": settings.broker}
        for row in summarize(raw, plan)
    ]
    print_table(rows, meta)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows, "raw": raw}, indent=2) + "\n")
    print(f"\nwrote {args.out} ({meta['elapsed_s']} s)")
    return 0


def collect(plan: Plan, settings: Settings, fsync: str) -> tuple[Raw, dict[str, Any]]:
    """Start the private Redis, measure, and stop everything whatever happens."""
    with tempfile.TemporaryDirectory(prefix="agentledger-bench-") as tmp:
        server = start_server(Path(tmp, "redis"), fsync=fsync)
        try:
            client = redis_client(server.url)
            try:
                bench = Bench(client, settings.with_(redis_url=server.url), Path(tmp))
                print(
                    f"bench on {server.url} (AOF {fsync}, {settings.broker} broker), {plan}",
                    file=sys.stderr,
                )
                raw = measure(bench, plan, tag=f"bench-{os.getpid()}")
                version = client.info("server")["redis_version"]
            finally:
                client.close()
        finally:
            server.stop()
    meta = {
        "plan": {"calls": plan.calls, "runs": plan.runs, "floor_ops": plan.floor_ops},
        "reps": plan.reps,
        "durability": f"AOF appendfsync {fsync}",
        "redis": f"private redis-server {version}",
        "broker": BROKER_NAMES[settings.broker],
        "worker_threads": settings.worker_threads,
        "shards": settings.shards,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    return raw, meta


if __name__ == "__main__":
    sys.exit(main())
