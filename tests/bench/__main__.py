"""`make bench` (`python -m tests.bench [--quick]`): what agentledger's
orchestration costs, next to the floor it stands on and to its peers, in one
invocation. On a private redis-server with AOF (everysec; W1 again at
`always`): F the floor, W1 one long run, W2 many one-call runs, W3 many runs at
once on one and two worker processes, A admission (runs created by one intake
process, published at once and paced), W5 state loads as the log grows and a
worker SIGKILLed mid-run, R an idle worker's Redis round trips with no run and
with runs parked on an approval, T Redis bytes per finished run before and after
retention (on a fresh server); and the peers (each in a process of its own, between
our repetitions). Medians of the repetitions; a table in the terminal and
bench-results/bench.json. A benchmark, not a test: the numbers move with
whatever else the machine is doing."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import dramatiq

from agentledger.services.errors import ConfigError, RedisUnavailable
from agentledger.services.settings import Settings, from_env
from tests.bench import (
    admission,
    embedded,
    floor,
    ours,
    parked,
    peers,
    recovery,
    report,
    retention,
    snapshots,
    state_load,
)
from tests.bench.harness import Bench, BenchError, private_bench
from tests.bench.plan import PLANS, WINDOW, Plan

OUT = Path("bench-results", "bench.json")
METRICS = ("--metrics-port", "0")  # W3 again with Prometheus metrics on: their cost


def collect(plan: Plan, settings: Settings, tmp: Path) -> tuple[dict[str, Any], list[str]]:
    tag = f"bench-{os.getpid()}"
    raw: dict[str, Any] = {"floor": [], "ours": [], "peers": {k: [] for k in peers.PEERS}}
    raw.update({"concurrent_1p": [], "concurrent_2p": [], "kills": [], "embedded": []})
    raw["concurrent_1p_metrics"] = []
    raw["admission"] = []
    raw["snapshots"] = []
    notes: list[str] = []
    with private_bench(settings, tmp, "everysec") as bench:
        raw["redis"] = bench.client.info("server")["redis_version"]
        for rep in range(1, plan.reps + 1):
            base = f"{tag}-r{rep}"
            raw["floor"].append(floor.measure(bench, f"{base}-floor", plan.floor_ops, plan.hops))
            seq = ours.sequential(bench, f"{base}-seq", plan.calls, plan.runs, plan.concurrent)
            raw["concurrent_1p"].append(seq.pop("concurrent"))
            raw["ours"].append(seq)
            raw["embedded"].append(embedded.measure(bench, f"{base}-run", plan.calls, tmp))
            raw["snapshots"].append(snapshots.measure(plan.snapshot_rounds))
            if rep <= plan.peer_reps:
                _peers(raw, plan, rep)
            raw["concurrent_2p"].append(ours.concurrent(bench, f"{base}-2p", *plan.concurrent, 2))
            raw["concurrent_1p_metrics"].append(
                ours.concurrent(bench, f"{base}-1pm", *plan.concurrent, 1, METRICS)
            )
            raw["admission"].append(_admission(bench, f"{base}-adm", plan.admission_runs))
            _progress(raw, rep, plan)
        template = bench.store(f"{tag}-r1-seq").read(raw["ours"][0]["long_run"]["run_id"])
        raw["state_load"] = state_load.measure(
            bench, f"{tag}-load", template, plan.log_sizes, plan.reps
        )
        notes.append("W5 loads of 50,000+ events: the whole-log fold is timed at most 3 times")
        retained = retention.template(bench, f"{tag}-retention")
        for rep in range(1, plan.kill_reps + 1):
            raw["kills"] += _kills(bench, f"{tag}-k{rep}", plan.kill_cases)
        raw["parked"] = [
            parked.measure(bench, f"{tag}-parked{rep}", plan.parked, plan.parked_window_s)
            for rep in range(1, plan.parked_reps + 1)
        ]
        notes.append(
            f"SIGKILL with the default settings: the sweeper re-drives a run idle for lease_s "
            f"({settings.lease_s:g} s); the broker hands a dead worker's messages on after "
            f"{settings.broker_claim_idle_s:g} s; a tool claim runs out at the tool's timeout + the spec's claim_grace_s (2 s), "
            f"a read's sooner when its worker is proven dead (silent for {settings.member_ttl_s:g} s, process gone)"
        )
    # R on a fresh server: its memory before the runs is the server's own
    raw["retention"] = [
        retention.measure(settings, tmp / "retention", retained, plan.retained_runs)
    ]
    notes.append(
        f"R: {plan.retained_runs:,} copies of a one-call run made through the full path, "
        "written through the store adapter (with their request keys), then one retention pass"
    )
    with private_bench(settings, tmp, "always") as always:
        raw["floor_always"] = [
            {
                "xadd_ms": floor.timed(
                    plan.floor_ops, lambda i: always.client.xadd(f"{tag}:x", floor.PAYLOAD)
                )
            }  # type: ignore[arg-type]
        ]
        raw["ours_always"] = [
            ours.sequential(always, f"{tag}-a{rep}", plan.calls, 0)
            for rep in range(plan.always_reps)
        ]
    for name, reps in raw["peers"].items():
        skipped = {r["skipped"] for r in reps if "skipped" in r}
        notes += [f"peer {name} skipped: {why}" for why in skipped]
    return raw, notes


def _admission(bench: Bench, prefix: str, runs: int) -> dict[str, Any]:
    """A: `runs` requests to one intake process, published at once and paced."""
    burst = admission.measure(bench, f"{prefix}-burst", runs)
    return {
        "burst": burst,
        "paced": admission.measure(bench, f"{prefix}-paced", runs, admission.RATE),
    }


def _peers(raw: dict[str, Any], plan: Plan, rep: int) -> None:
    """Each peer once, in an order that turns with the repetition."""
    names = list(peers.PEERS)
    names = names[rep - 1 :] + names[: rep - 1]
    for name in names:
        raw["peers"][name].append(peers.measure(name, plan.peer_calls, plan.peer_runs))


def _kills(bench: Bench, prefix: str, cases: tuple[str, ...]) -> list[dict[str, Any]]:
    """The kill cases at once, each on its own prefix and worker processes."""
    results: dict[str, Any] = {}

    def one(holding: str) -> None:
        try:
            results[holding] = recovery.measure(bench, f"{prefix}-{holding}", holding)
        except BaseException as exc:  # handed to the main thread below
            results[holding] = exc

    threads = [threading.Thread(target=one, args=(h,)) for h in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for value in results.values():
        if isinstance(value, BaseException):
            raise value
    return [results[h] for h in cases]


def _progress(raw: dict[str, Any], rep: int, plan: Plan) -> None:
    long_run, p1, p2 = (
        raw["ours"][-1]["long_run"],
        raw["concurrent_1p"][-1],
        raw["concurrent_2p"][-1],
    )
    print(
        f"  rep {rep}/{plan.reps}: W1 {long_run['ms_per_call']:.1f} ms/call, growth "
        f"x{long_run['growth']:.2f}; W3 {p1['calls_per_s']:.0f} / {p2['calls_per_s']:.0f} calls/s",
        file=sys.stderr,
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    p.add_argument("--reps", type=int, help="repetitions (at least 3 for a median worth quoting)")
    p.add_argument("--calls", type=int, help=f"W1 calls in the long run (at least {2 * WINDOW})")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    plan = PLANS["quick" if args.quick else "default"]
    if args.reps:
        plan = replace(plan, reps=args.reps, peer_reps=min(plan.peer_reps, args.reps))
    if args.calls:
        plan = replace(plan, calls=args.calls, peer_calls=args.calls)
    if plan.calls < 2 * WINDOW:
        p.error(f"--calls must be at least {2 * WINDOW}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally blocks run
    started = time.monotonic()
    try:
        settings = from_env()
        with tempfile.TemporaryDirectory(prefix="agentledger-bench-") as tmp:
            print(f"bench: {plan}", file=sys.stderr, flush=True)
            raw, notes = collect(plan, settings, Path(tmp))
    except (BenchError, ConfigError, RedisUnavailable) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    meta = {
        "plan": plan.__dict__,
        "reps": plan.reps,
        "redis": f"private redis-server {raw['redis']} (AOF everysec; W1 and XADD again at always)",
        "broker": f"our StreamsBroker (dramatiq {dramatiq.__version__})",
        "worker_threads": settings.worker_threads,
        "shards": settings.shards,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "elapsed_s": round(time.monotonic() - started, 1),
        "notes": notes,
    }
    out = report.rows(raw, plan, "Redis AOF everysec")
    report.print_table(out, meta)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": out, "raw": raw}, indent=1) + "\n")
    print(f"\nwrote {args.out} ({meta['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
