"""Admission: how fast one intake process turns published requests into runs.
`runs` signed RunRequested entries (the bench's 5-call scripted agent, one spec
for all, each its own request id) are published by one thread as fast as it
can (a burst), to an intake process on its own (`agentledger intake`, counted:
its CPU and round trips); no worker runs them (the bench's tool set is
registered in the directory as a worker would register it). Each run's
publish→created latency is from just before its entry was published to the
`at` of its RunCreated (the intake's clock, the same machine's); runs/s
created is the runs over the time from the first publish to the last
RunCreated. Measured twice: a burst (the publisher as fast as it goes: a
backlog builds whenever it outpaces the intake, and the latency is the
backlog's), and paced at 1,000 runs/s offered (the latency of admission itself
at the target's rate).

Run alone as `python -m tests.bench.admission [--runs N] [--reps R]` (a private
redis-server; prints the figures as JSON)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.redis.slot_reads import read_each
from agentledger.services.adapters.tools.toolset import load_toolset
from agentledger.services.settings import environ_for_children, from_env
from tests.bench.harness import (
    INTAKE_READY,
    Bench,
    BenchError,
    _await_ready,
    _counted,
    private_bench,
    stop,
)
from tests.bench.harness import Pool as _Pool
from tests.bench.plan import QUEUE, TOOLS_DIR, TOOLS_MODULE, bench_spec, request_for

CALLS = 5  # the spec of each run: 5 scripted calls (as the 1,000 runs x 5 calls)
TIMEOUT_S = 300.0
RATE = 1000.0  # runs/s offered by the paced measure (the target's rate)


def measure(bench: Bench, prefix: str, runs: int, rate: float | None = None) -> dict[str, Any]:
    """`runs` requests to one intake process: a burst (`rate` None), or published
    at `rate` a second (each at its time, when the publisher keeps up)."""
    keys = bench.keys(prefix)
    assert bench.signer  # filed before the intake reads the file
    toolset = load_toolset([TOOLS_MODULE], [TOOLS_DIR])
    Directory(bench.client, keys, member_ttl_s=bench.settings.member_ttl_s).register(
        QUEUE, toolset.fingerprint, toolset.manifest()
    )
    spec = bench_spec(CALLS)
    signer = bench.signer
    requests = [request_for(spec, keys.shards) for _ in range(runs)]
    env = environ_for_children(bench.settings.with_(prefix=prefix))
    log, counts = bench.log_dir / f"{prefix}-intake.log", bench.log_dir / f"{prefix}-counts.json"
    intake = _counted(counts, log, ["intake"], env)
    try:
        _await_ready(intake, timeout_s=60, ready=INTAKE_READY)
        pool = _Pool(keys, [intake], [counts], bench.client)
        cursors = _feed_cursors(bench, keys)
        before = pool.cost()
        sent: dict[str, float] = {}
        start = time.time()
        for i, request in enumerate(requests):  # sign and publish, one after the other
            if rate is not None and (ahead := start + i / rate - time.time()) > 0:
                time.sleep(ahead)
            sent[str(request.run_id)] = time.time()
            publish(bench.client, keys, request, signer=signer)
        created = _created(bench, cursors, set(sent), TIMEOUT_S)
        cost = pool.cost() - before
    except BenchError as exc:
        raise BenchError(f"{exc}\n{log.read_text(errors='replace')[-1500:]}") from None
    finally:
        stop([intake])
    waits = sorted((created[r] - sent[r]) * 1000 for r in sent)
    span = max(created.values()) - min(sent.values())
    return {
        "runs": runs,
        "offered_per_s": rate,
        "runs_per_s": runs / span,
        "publish_s": max(sent.values()) - min(sent.values()),
        "p50_ms": _pct(waits, 50),
        "p99_ms": _pct(waits, 99),
        "max_ms": waits[-1],
        "intake_cpu_ms_per_run": cost.cpu_s * 1000 / runs,
        "round_trips_per_run": cost.round_trips / runs,
        "redis_cpu_ms_per_run": cost.redis_cpu_s * 1000 / runs,
    }


def _feed_cursors(bench: Bench, keys: Any) -> dict[str, str]:
    cursors = {}
    for shard in range(keys.shards):
        last: Any = bench.client.xrevrange(keys.feed(shard), count=1)
        cursors[keys.feed(shard)] = last[0][0].decode() if last else "0-0"
    return cursors


def _created(
    bench: Bench, cursors: dict[str, str], wanted: set[str], timeout_s: float
) -> dict[str, float]:
    """run id -> the `at` of its RunCreated (ms, from the feed), for every wanted run."""
    found: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    while len(found) < len(wanted):
        if time.monotonic() > deadline:
            raise BenchError(f"{len(wanted) - len(found)} runs not created after {timeout_s:g}s")
        for stream, entries in read_each(bench.client, cursors, count=1000, block_ms=200):
            cursors[stream.decode()] = entries[-1][0].decode()
            for _, fields in entries:
                run = fields[b"run"].decode()
                if fields[b"first"] == b"1" and run in wanted:
                    found[run] = int(fields[b"at"]) / 1000
    return found


def _pct(sorted_values: list[float], p: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[i]


def summary(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the repetitions (and every value)."""
    keys = [k for k in reps[0] if k not in ("runs", "offered_per_s")]
    return {k: {"median": median(r[k] for r in reps), "values": [r[k] for r in reps]} for k in keys}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.admission", description=__doc__)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rate", type=float, default=RATE, help="runs/s offered by the paced row")
    args = p.parse_args(argv)
    settings = from_env()
    burst, paced = [], []
    with tempfile.TemporaryDirectory(prefix="agentledger-admission-") as tmp:
        with private_bench(settings, Path(tmp), "everysec") as bench:
            for i in range(args.reps):
                burst.append(measure(bench, f"adm-{i}", args.runs))
                paced.append(measure(bench, f"adm-{i}-paced", args.runs, args.rate))
    out = {"burst": burst, "paced": paced}
    print(json.dumps({**out, "median": {k: summary(v) for k, v in out.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
