"""`make bench-w3` (`python -m tests.bench.w3`): W3 alone — `runs` runs of `calls`
calls submitted at once to one worker process, then to two, repeated — for
measuring the carrying rule (tail latency, throughput, scaling) without the whole
bench. One JSON line a repetition on stdout (calls/s, p50 and p99 turn latency,
messages and round trips per call, 1 and 2 processes), then the medians and
ranges. A benchmark, not a test: the numbers move with whatever else the machine
is doing."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

from agentledger.services.settings import from_env
from tests.bench import ours
from tests.bench.harness import private_bench

KEYS = ("calls_per_s", "p50_turn_ms", "p99_turn_ms", "messages", "round_trips", "cpu_ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.w3", description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--runs", type=int, default=64)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--processes", default="1,2", help="e.g. 1,2 (the default) or 1")
    args = parser.parse_args(argv)
    counts = [int(p) for p in args.processes.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agentledger-w3-") as tmp:
        with private_bench(from_env(), Path(tmp), "everysec") as bench:
            for rep in range(1, args.reps + 1):
                row: dict[str, Any] = {"rep": rep}
                for p in counts:
                    prefix = f"w3-{os.getpid()}-r{rep}-{p}p"
                    got = ours.concurrent(bench, prefix, args.runs, args.calls, p)
                    row[f"{p}p"] = {k: round(float(got[k]), 3) for k in KEYS if k in got}
                if len(counts) > 1:
                    row["scaling"] = row[f"{counts[1]}p"]["calls_per_s"] / row["1p"]["calls_per_s"]
                print(json.dumps(row), flush=True)
                rows.append(row)
    _summary(rows, counts)
    return 0


def _summary(rows: list[dict[str, Any]], counts: list[int]) -> None:
    for p in counts:
        for key in KEYS:
            values = [r[f"{p}p"][key] for r in rows if key in r[f"{p}p"]]
            if values:
                print(f"{p}p {key}: median {median(values):.2f} "
                      f"({min(values):.2f}-{max(values):.2f})", file=sys.stderr)  # fmt: skip
        ratios = [r[f"{p}p"]["p99_turn_ms"] / r[f"{p}p"]["p50_turn_ms"] for r in rows]
        print(f"{p}p p99/p50: median {median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
              file=sys.stderr)  # fmt: skip
    if len(counts) > 1:
        scaling = [r["scaling"] for r in rows]
        print(f"scaling: median {median(scaling):.2f} ({min(scaling):.2f}-{max(scaling):.2f})",
              file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
