"""W1 as a user first times it: `agentledger run SPEC` (the embedded default:
the pools in the command's own process, on a private queue, following the run
and printing its timeline), against the bench's private Redis. Its ms per call
is W1's: from the run's creation to its end, over the calls (the command's
start-up, imports and first connections, is its own row). For CPU and round
trips the command is run twice, with the long run and with a 2-call run, and
the per-call cost is the difference over the difference in calls (start-up and
shutdown left out, following and printing kept), counted like the workers'
(`counted_worker`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentledger.services.settings import environ_for_children
from tests.bench.harness import REPO_ROOT, Bench, BenchError
from tests.bench.plan import WINDOW, bench_spec

SHORT = 2  # calls in the run whose cost is taken off


def measure(bench: Bench, prefix: str, calls: int, tmp: Path) -> dict[str, Any]:
    long_run, short = _one(bench, prefix, calls, tmp), _one(bench, prefix, SHORT, tmp)
    extra = calls - SHORT

    def per_call(key: str) -> float:
        return (long_run[key] - short[key]) / extra

    return {
        "ms_per_call": long_run["run_s"] / calls * 1000,
        "start_s": long_run["start_s"],  # the command started to the run created
        "cpu_ms": per_call("cpu_s") * 1000,
        "round_trips": per_call("round_trips"),
        "commands": per_call("commands"),
        "growth": long_run["growth"],
    }


def _one(bench: Bench, prefix: str, calls: int, tmp: Path) -> dict[str, Any]:
    spec = tmp / f"{prefix}-{calls}.yaml"  # JSON is YAML
    spec.write_text(json.dumps(bench_spec(calls).model_dump(mode="json")))
    counts, out = tmp / f"{prefix}-{calls}.counts.json", tmp / f"{prefix}-{calls}.out"
    env = environ_for_children(bench.settings.with_(prefix=prefix))
    command = [sys.executable, "-m", "tests.bench.counted_worker", str(counts), "run", str(spec)]
    started = time.time()
    with out.open("wb") as stdout:
        proc = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = out.read_text(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"agentledger run exited {proc.returncode}:\n{text[-2000:]}")
    last = text.strip().splitlines()[-1]  # "run <id>: completed  …"
    run_id = last.split()[1].rstrip(":")
    log = bench.store(prefix).read(run_id)
    if not log or log[-1].type != "RunCompleted":
        raise BenchError(f"run {run_id!r} of agentledger run did not complete: {last}")
    done = json.loads(counts.read_text())
    marks = [log[0].at] + [e.at for e in log if e.type == "ToolCallSucceeded"]
    turns = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    window = min(WINDOW, len(turns) // 2) or 1
    return {
        "run_s": log[-1].at - log[0].at,
        "start_s": log[0].at - started,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "round_trips": done["round_trips"],
        "commands": sum(done["commands"].values()),
        "growth": _median(turns[-window:]) / _median(turns[:window]),
    }


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
