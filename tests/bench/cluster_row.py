"""W3 on a local Redis Cluster beside one Redis: the same runs submitted at once
to the same worker processes, on a private redis-server and on 3 masters
started here (`--cluster-enabled yes`; AOF everysec on both), with and without
AGENTLEDGER_REPLICA_ACKS=1 on the cluster (then each master has a replica).
Prints one row per setup and writes them to bench-results/cluster.json.

`python -m tests.bench.cluster_row [--runs 16] [--calls 5] [--processes 2]`"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentledger.services.adapters.redis.client import redis_client
from agentledger.services.settings import Settings
from tests.bench.harness import Bench, private_bench
from tests.bench.ours import concurrent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "cluster"))
from clusterkit import start_cluster  # noqa: E402

OUT = Path("bench-results", "cluster.json")


@contextmanager
def cluster_bench(settings: Settings, tmp: Path, *, replicas: int) -> Iterator[Bench]:
    cluster = start_cluster(tmp / f"cluster-{replicas}", masters=3, replicas=replicas)
    client = redis_client(cluster.url)
    try:
        yield Bench(cluster, client, settings.with_(redis_url=cluster.url), tmp, "everysec")
    finally:
        client.close()
        cluster.stop()


def row(name: str, bench: Bench, runs: int, calls: int, processes: int) -> dict[str, Any]:
    result = concurrent(bench, f"bc-{uuid.uuid4().hex[:8]}", runs, calls, processes)
    result["setup"] = name
    print(
        f"{name:<34} {result['calls_per_s']:8.0f} calls/s  p50 turn {result['p50_turn_ms']:6.1f} ms"
        f"  p99 {result['p99_turn_ms']:6.1f} ms  {result['cpu_ms']:5.2f} ms CPU/call"
        f"  {result['round_trips']:5.1f} round trips/call",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.cluster_row", description=__doc__)
    p.add_argument("--runs", type=int, default=16)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    settings = Settings(probe_url=None)
    shape = (args.runs, args.calls, args.processes)
    print(f"W3: {args.runs} runs x {args.calls} calls at once, {args.processes} worker processes")
    rows = []
    with tempfile.TemporaryDirectory(prefix="al-bench-cluster-") as folder:
        tmp = Path(folder)
        with private_bench(settings, tmp, "everysec") as bench:
            rows.append(row("one Redis", bench, *shape))
        with cluster_bench(settings, tmp, replicas=0) as bench:
            rows.append(row("cluster, 3 masters", bench, *shape))
        acks = settings.with_(replica_acks=1)
        with cluster_bench(acks, tmp, replicas=1) as bench:
            rows.append(row("cluster, 3+3, REPLICA_ACKS=1", bench, *shape))
    base = rows[0]["cpu_ms"]
    for r in rows[1:]:
        print(f"{r['setup']}: CPU per call {r['cpu_ms'] / base:.2f}x one Redis's")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"shape": shape, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
