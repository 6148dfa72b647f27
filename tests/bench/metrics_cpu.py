"""The metrics' own cost, measured directly: one `agentledger workers
--metrics-port 0` process (on a private redis-server) runs W3-like load (runs
of the no-op tool), with the thread CPU of every metrics function added up —
the step observer, the step timer's two hooks, the flushes — against the
process's whole CPU. Throughput ratios on a loaded 2-core machine vary by more
than the 5 % the metrics may cost; this share does not.

    python -m tests.bench.metrics_cpu [RUNS CALLS] [--multiprocess]
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WARM_UP_RUNS = 8


def _timed_worker(argv: list[str]) -> int:
    """Run `agentledger` with the metrics functions timed; print the sums at exit."""
    from agentledger.services.adapters.metrics import instruments as ins

    spent: dict[str, float] = {}
    lock = threading.Lock()

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    spent[name] = spent.get(name, 0.0) + time.thread_time() - started

        return wrapper

    for cls, name in ((ins.Instruments, "observe_step"), (ins.Instruments, "flush"),
                      (ins.StepTimer, "before_process_message"), (ins.StepTimer, "after_process_message")):  # fmt: skip
        setattr(cls, name, timed(name, getattr(cls, name)))
    from agentledger.services.entrypoints.cli.main import main

    try:
        return main(argv)
    finally:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print("METRICS_CPU " + json.dumps({"spent": spent, "cpu_s": usage.ru_utime + usage.ru_stime}),
              file=sys.stderr, flush=True)  # fmt: skip


def measure(runs: int, calls: int, *, multiprocess: bool) -> dict[str, Any]:
    from agentledger.services.adapters.redis.client import redis_client
    from agentledger.services.adapters.redis.local_server import start_server
    from agentledger.services.keys import Keys
    from tests.bench.harness import Follower
    from tests.bench.plan import QUEUE, TOOLS_DIR, TOOLS_MODULE, bench_spec, request_for

    server = start_server(Path(tempfile.mkdtemp(prefix="metrics-cpu-")))
    try:
        env = {**os.environ, "REDIS_URL": server.url, "AGENTLEDGER_PREFIX": "mcpu"}
        env["AGENTLEDGER_PROBE_URL"] = "off"
        if multiprocess:
            env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="metrics-cpu-mp-")
        args = ["workers", "--tools", TOOLS_MODULE, "--tool-path", TOOLS_DIR, "--queue", QUEUE]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.metrics_cpu", "--worker", *args, "--metrics-port", "0"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and "workers up" in proc.stdout.readline()
        keys = Keys("mcpu", 16)
        follow = Follower(redis_client(server.url), keys)
        for n in (WARM_UP_RUNS, runs):
            published = follow.submit(keys, [request_for(bench_spec(calls)) for _ in range(n)])
            follow.wait(list(published), timeout_s=60 + n * calls / 5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        (line,) = [x for x in err.splitlines() if x.startswith("METRICS_CPU ")]
        found = json.loads(line.split(" ", 1)[1])
        metrics_s = sum(found["spent"].values())
        return {"tool_calls": (WARM_UP_RUNS + runs) * calls, "metrics_cpu_s": metrics_s,
                "process_cpu_s": found["cpu_s"], "share": metrics_s / found["cpu_s"],
                "by_function_s": found["spent"]}  # fmt: skip
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return _timed_worker(argv[1:])
    numbers = [int(a) for a in argv if a.isdigit()]
    runs, calls = (numbers + [32, 10])[:2] if len(numbers) < 2 else numbers[:2]
    result = measure(runs, calls, multiprocess="--multiprocess" in argv)
    print(json.dumps(result, indent=1))
    print(f"metrics: {100 * result['share']:.1f} % of the worker's CPU", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
