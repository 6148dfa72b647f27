"""The parked-runs row: what runs waiting for a person cost an idle worker. One
`agentledger workers` process (counted: `tests.bench.counted_worker`) on a
prefix of its own; its Redis round trips per second over a quiet window with no
run at all, then again once `parked` runs wait for an approval nobody gives (each
run's first call needs one; the approval expires after an hour). The intake's
round trips are not the worker's and are not counted.

    python -m tests.bench.parked [PARKED] [--window S]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentledger.schemas.spec import Policies, ScriptedCall, ScriptedTurn
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.redis.slot_reads import read_each
from agentledger.services.settings import from_env
from tests.bench.harness import Bench, BenchError, Pool, private_bench
from tests.bench.plan import request_for, spec_of

PARKED = 1_000
WINDOW_S = 10.0
SETTLE_S = 8.0  # after the last run parks: a sweeper's first look at each (a lease, 10 passes)


def approval_spec() -> Any:
    call = ScriptedCall(id="c1", name="bench_approved", input={"n": 1})
    spec = spec_of([ScriptedTurn(tool_use=(call,))], "one call a person must approve")
    return spec.model_copy(update={"policies": Policies(approval_timeout_s=3600.0)})


def round_trips(pool: Pool) -> int:
    """The worker's round trips so far (not the intake's: its counts come first)."""
    time.sleep(0.15)  # the counts are written every 50 ms
    return sum(json.loads(p.read_text())["round_trips"] for p in pool.count_files[1:])


def idle_rate(pool: Pool, window_s: float) -> float:
    before = round_trips(pool)
    started = time.monotonic()
    time.sleep(window_s)
    return (round_trips(pool) - before) / (time.monotonic() - started)


def park(bench: Bench, pool: Pool, count: int, timeout_s: float) -> None:
    """Submit `count` runs and wait until each asks for its approval (its shard's feed
    says so)."""
    keys = pool.keys
    cursors: dict[str, str] = {}
    for shard in range(keys.shards):
        last: Any = bench.client.xrevrange(keys.feed(shard), count=1)
        cursors[keys.feed(shard)] = last[0][0].decode() if last else "0-0"
    requests = [request_for(approval_spec(), keys.shards) for _ in range(count)]
    for request in requests:
        publish(bench.client, keys, request, signer=bench.signer)
    waiting = {str(r.run_id) for r in requests}
    deadline = time.monotonic() + timeout_s
    while waiting:
        if time.monotonic() > deadline:
            raise BenchError(f"{len(waiting)} runs not awaiting approval after {timeout_s:g}s")
        for stream, entries in read_each(bench.client, cursors, count=1000, block_ms=200):
            cursors[stream.decode()] = entries[-1][0].decode()
            for _, fields in entries:
                if fields[b"type"] == b"ApprovalRequested":
                    waiting.discard(fields[b"run"].decode())


def measure(bench: Bench, prefix: str, parked: int, window_s: float) -> dict[str, Any]:
    with bench.workers(prefix, 1) as pool:
        time.sleep(2.0)  # the worker's start-up settles
        none = idle_rate(pool, window_s)
        started = time.monotonic()
        park(bench, pool, parked, timeout_s=60 + parked / 10)
        parked_s = time.monotonic() - started
        time.sleep(SETTLE_S)
        with_parked = idle_rate(pool, window_s)
    return {
        "parked": parked,
        "window_s": window_s,
        "idle_rt_per_s": none,
        "parked_rt_per_s": with_parked,
        "ratio": with_parked / none if none else float("inf"),
        "park_s": parked_s,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.parked", description=__doc__)
    p.add_argument("parked", nargs="?", type=int, default=PARKED)
    p.add_argument("--window", type=float, default=WINDOW_S)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agentledger-parked-") as tmp:
        with private_bench(from_env(), Path(tmp), "everysec") as bench:
            try:
                result = measure(bench, "parked", args.parked, args.window)
            except BenchError as exc:
                print(f"bench: {exc}", file=sys.stderr)
                return 1
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
