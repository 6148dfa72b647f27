"""agentledger's own workloads, through worker processes on the private Redis:
W1 one run of many sequential tool calls (ms per call, and how a turn's time
grows along the run), W2 many one-call runs one after the other (ms per run),
W3 many runs at once on one and two worker processes (calls per second, turn
latency, CPU per call). Turn times come from the events' own timestamps: a
turn ends when its ToolCallSucceeded is appended."""

from __future__ import annotations

import time
from collections.abc import Sequence
from statistics import median
from typing import Any

from tests.bench.harness import Bench, BenchError, Follower, Pool
from tests.bench.plan import PARALLEL_READS, WINDOW, bench_spec, parallel_spec, request_for


def sequential(
    bench: Bench, prefix: str, calls: int, runs: int, concurrent: tuple[int, int] | None = None
) -> dict[str, Any]:
    """W1, then (when asked) W2 and W3 on the same worker process."""
    with bench.workers(prefix, 1) as pool:
        follow = Follower(bench.client, pool.keys, bench.signer)
        _warm_up(pool, follow, 2)
        result = {"long_run": _long_run(bench, pool, follow, calls)}
        if runs:
            result["many_runs"] = _many_runs(pool, follow, runs)
        if concurrent:
            result["concurrent"] = _concurrent(bench, pool, follow, *concurrent)
        result["parallel_reads"] = _parallel_reads(pool, follow)
        return result


def _parallel_reads(pool: Pool, follow: Follower) -> dict[str, Any]:
    """N independent reads of one turn: all at once, then one at a time (locks still taken)."""
    wall: dict[str, float] = {}
    for name, at_once in (("parallel_s", PARALLEL_READS), ("serial_s", 1)):
        request = request_for(parallel_spec(at_once=at_once))
        run_id = str(request.run_id)
        published = follow.submit(pool.keys, [request])[run_id]
        wall[name] = follow.wait([run_id], timeout_s=60)[run_id] - published
    return {**wall, "speedup": wall["serial_s"] / wall["parallel_s"], "reads": PARALLEL_READS}


def _long_run(bench: Bench, pool: Pool, follow: Follower, calls: int) -> dict[str, Any]:
    request = request_for(bench_spec(calls))
    run_id = str(request.run_id)
    before = pool.cost()
    published = follow.submit(pool.keys, [request])[run_id]
    ended = follow.wait([run_id], timeout_s=60 + 3 * calls)[run_id]
    cost = pool.cost() - before
    turns = turn_times(bench, pool, run_id, calls)
    first, last = median(turns[:WINDOW]), median(turns[-WINDOW:])
    return {
        "run_id": run_id,
        "ms_per_call": (ended - published) / calls * 1000,
        "first_turns_ms": first,
        "last_turns_ms": last,
        "growth": last / first,
        **cost.per(calls),
        "turn_ms": [round(t, 3) for t in turns],
    }


def _many_runs(pool: Pool, follow: Follower, runs: int) -> dict[str, Any]:
    before = pool.cost()
    started = time.time()
    for _ in range(runs):
        request = request_for(bench_spec(1))
        follow.submit(pool.keys, [request])
        follow.wait([str(request.run_id)], timeout_s=30)
    wall_s = time.time() - started
    return {"ms_per_run": wall_s / runs * 1000, **(pool.cost() - before).per(runs)}


def concurrent(
    bench: Bench, prefix: str, runs: int, calls: int, processes: int, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """W3: `runs` runs of `calls` calls submitted at once to `processes` worker processes
    (started with the `workers` options `extra`)."""
    with bench.workers(prefix, processes, extra) as pool:
        follow = Follower(bench.client, pool.keys, bench.signer)
        _warm_up(pool, follow, 4 * processes)
        return _concurrent(bench, pool, follow, runs, calls)


def _concurrent(
    bench: Bench, pool: Pool, follow: Follower, runs: int, calls: int
) -> dict[str, Any]:
    requests = [request_for(bench_spec(calls)) for _ in range(runs)]
    before = pool.cost()
    published = follow.submit(pool.keys, requests)
    ended = follow.wait(list(published), timeout_s=60 + runs * calls / 10)
    cost = pool.cost() - before
    turns = [t for r in published for t in turn_times(bench, pool, r, calls)]
    wall_s = max(ended.values()) - min(published.values())
    return {
        "calls_per_s": runs * calls / wall_s,
        "p50_turn_ms": percentile(turns, 50),
        "p99_turn_ms": percentile(turns, 99),
        **cost.per(runs * calls),
    }


def _warm_up(pool: Pool, follow: Follower, runs: int) -> None:
    """A few short runs first: imports, first connections and tool loading are not measured."""
    published = follow.submit(pool.keys, [request_for(bench_spec(2)) for _ in range(runs)])
    follow.wait(list(published), timeout_s=60)


def turn_times(bench: Bench, pool: Pool, run_id: str, calls: int) -> list[float]:
    """ms from the run's creation to its first call's success, then between successes."""
    log = bench.store(pool.keys.prefix).read(run_id)
    marks = [log[0].at] + [e.at for e in log if e.type == "ToolCallSucceeded"]
    if len(marks) != calls + 1:
        raise BenchError(f"run {run_id!r} has {len(marks) - 1} successful calls, not {calls}")
    return [(b - a) * 1000 for a, b in zip(marks, marks[1:], strict=False)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]
