"""A worker's resident memory after a long run (`python -m tests.bench.rss`):
one worker process (`agentledger workers` on the bench's tool set) on a private
Redis serves one run of `--calls` no-op tool calls (`--per-turn` of them a turn;
a spec allows at most 10,000 turns), or `--runs` such runs one after the other;
then the process reports its RSS (VmRSS, and the peak VmHWM), again after a
full garbage collection and `malloc_trim(0)` (what is live, apart from what
the allocator merely kept), and with `--trace` the top tracemalloc entries (the
run is then several times slower). The issue's figure: 910 MB after a
17,000-call run; the target 300 MB (the model pool's limit is 1 Gi).

`python -m tests.bench.rss worker REPORT` is the worker process itself: the
workers command, and a thread that writes REPORT when REPORT.ask appears."""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from agentledger.schemas.spec import Budgets, ScriptedCall, ScriptedTurn
from agentledger.services.settings import environ_for_children, from_env
from tests.bench.harness import REPO_ROOT, Follower, _await_ready, private_bench, stop
from tests.bench.plan import QUEUE, TOOLS_DIR, TOOLS_MODULE, request_for, spec_of

TRACE = "AGENTLEDGER_BENCH_TRACEMALLOC"


def _status() -> dict[str, int]:
    """VmRSS and VmHWM of this process, in kB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found


def _report() -> dict[str, Any]:
    out: dict[str, Any] = {"before_gc": _status()}
    top = None
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        stats = snap.statistics(
            "traceback" if len(snap.traces) and tracemalloc.get_traceback_limit() > 1 else "lineno"
        )
        top = [
            {
                "where": [str(f) for f in s.traceback][-6:],
                "mb": round(s.size / 1e6, 2),
                "blocks": s.count,
            }
            for s in stats[:25]
        ]
        out["traced_mb"] = round(sum(s.size for s in stats) / 1e6, 1)
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    out["after_gc_trim"] = _status()
    out["top"] = top
    return out


def _answer(report: Path) -> None:
    ask = report.with_suffix(".ask")
    while True:
        if ask.exists():
            ask.unlink()
            report.write_text(json.dumps(_report()))
        time.sleep(0.1)


def worker(report: Path) -> int:
    if os.environ.get(TRACE):
        tracemalloc.start(int(os.environ[TRACE]))
    threading.Thread(target=_answer, args=(report,), daemon=True).start()
    from agentledger.services.entrypoints.cli.main import main as agentledger

    return agentledger(
        ["workers", "--tools", TOOLS_MODULE, "--tool-path", TOOLS_DIR, "--queue", QUEUE]
    )


def long_spec(calls: int, per_turn: int, chars: int) -> Any:
    """`calls` calls, `per_turn` a turn: of bench_noop, or of bench_text returning
    `chars` characters each."""
    name = "bench_text" if chars else "bench_noop"
    extra = {"chars": chars} if chars else {}
    turns = [
        ScriptedTurn(
            tool_use=tuple(
                ScriptedCall(id=f"c{t}.{k}", name=name, input={"n": t * per_turn + k, **extra})
                for k in range(per_turn)
            )
        )
        for t in range(calls // per_turn)
    ]
    spec = spec_of(turns, f"call {name} {calls} times, {per_turn} a turn")
    return spec.model_copy(update={"budgets": Budgets(max_turns=len(turns) + 1)})


def ask(report: Path, timeout_s: float = 120.0) -> dict[str, Any]:
    report.unlink(missing_ok=True)
    report.with_suffix(".ask").touch()
    deadline = time.monotonic() + timeout_s
    while not report.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not report")
        time.sleep(0.1)
    time.sleep(0.1)
    found: dict[str, Any] = json.loads(report.read_text())
    return found


def measure(
    calls: int, per_turn: int, runs: int, chars: int, trace: int, env_extra: dict[str, str]
) -> dict[str, Any]:
    settings = from_env()
    with (
        tempfile.TemporaryDirectory() as tmp,
        private_bench(settings, Path(tmp), "everysec") as bench,
    ):
        prefix = "rss"
        env = environ_for_children(bench.settings.with_(prefix=prefix))
        env.update(env_extra)
        if trace:
            env[TRACE] = str(trace)
        report = Path(tmp, "report.json")
        command = [sys.executable, "-m", "tests.bench.rss", "worker", str(report)]
        with open(Path(tmp, "worker.log"), "wb") as err:
            proc = subprocess.Popen(
                command, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        try:
            _await_ready(proc, timeout_s=60)
            started = ask(report)
            keys = bench.keys(prefix)
            follow = Follower(bench.client, keys, bench.signer)
            began = time.time()
            for _ in range(runs):
                request = request_for(long_spec(calls, per_turn, chars))
                follow.submit(keys, [request])
                follow.wait(
                    [str(request.run_id)], timeout_s=120 + 0.05 * calls * (20 if trace else 1)
                )
            took = time.time() - began
            ended = ask(report)
        finally:
            stop([proc])
        return {
            "calls": calls, "per_turn": per_turn, "runs": runs, "chars": chars,
            "wall_s": round(took, 1),
            "idle_kb": started["after_gc_trim"], "after_kb": ended["before_gc"],
            "after_gc_trim_kb": ended["after_gc_trim"], "traced_mb": ended.get("traced_mb"),
            "top": ended["top"],
        }  # fmt: skip


def main() -> int:
    if sys.argv[1:2] == ["worker"]:
        return worker(Path(sys.argv[2]))
    parser = argparse.ArgumentParser(prog="python -m tests.bench.rss")
    parser.add_argument("--calls", type=int, default=17_000)
    parser.add_argument("--per-turn", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--chars", type=int, default=0, help="each call returns this much text (0: a no-op)"
    )
    parser.add_argument(
        "--trace",
        type=int,
        default=0,
        metavar="FRAMES",
        help="tracemalloc's top entries, FRAMES deep (slow)",
    )
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for the worker (repeatable)"
    )
    args = parser.parse_args()
    env_extra = dict(item.split("=", 1) for item in args.env)
    result = measure(args.calls, args.per_turn, args.runs, args.chars, args.trace, env_extra)
    result["env"] = env_extra
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
