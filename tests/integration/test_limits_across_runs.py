"""Concurrency keys across runs and worker processes, on a real redis-server: 64
runs of 8 parallel calls each to a tool declared `limits: [{key: svc:pay, max: 10}]`,
served by two `agentledger workers` processes; the tool counts the calls inside it
itself (a file under an exclusive lock, shared by the processes) and never sees
more than 10 at once (with the workers' 16 tool threads; with `max: 1000` it sees
16); every call runs once and every run completes. Measured on a busy 2-core
machine: 12.0 s for the 512 calls (10.9 s with `max: 1000`)."""

from __future__ import annotations

import fcntl
import json
import time
from pathlib import Path

import pytest
import redis
from itkit import QUEUE, call
from test_worker_sigkill import Workers, workers  # noqa: F401 -- the fixture

from agentledger.events.status import RunStatus
from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.inbox.publishing import publish
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.tools.toolset import load_toolset
from agentledger.services.handlers.state_cache import cache_for
from agentledger.services.keys import Keys

RUNS, CALLS, MAX = 64, 8, 10
MODULE = "lim_tools"
SOURCE = '''"""A tool behind a concurrency key, counting the calls inside it itself."""

import fcntl
import json
import time

from agentledger import tool

COUNTER = {counter!r}


def _add(n: int) -> None:
    with open(COUNTER, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        seen = json.loads(f.read())
        seen["now"] += n
        seen["peak"] = max(seen["peak"], seen["now"])
        seen["calls"] += n > 0
        f.seek(0)
        f.truncate()
        f.write(json.dumps(seen))


@tool(read_only=True, limits=[{{"key": "svc:pay", "max": {most}}}])
def pay(n: int) -> str:
    """Pay n."""
    _add(1)
    try:
        time.sleep(0.03)
    finally:
        _add(-1)
    return "paid"
'''


def counted(counter: Path) -> dict[str, int]:
    with open(counter) as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        seen: dict[str, int] = json.loads(f.read())
        return seen


@pytest.mark.slow
def test_64_runs_of_8_calls_never_put_more_than_10_in_the_tool_at_once(
    client: redis.Redis,
    keys: Keys,
    workers: Workers,  # noqa: F811 -- the fixture
    tmp_path: Path,
    workspace: Path,
    signer: Signer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tools = tmp_path / "limtools"
    tools.mkdir()
    counter = tmp_path / "counter.json"
    counter.write_text(json.dumps({"now": 0, "peak": 0, "calls": 0}))
    (tools / f"{MODULE}.py").write_text(SOURCE.format(counter=str(counter), most=MAX))
    toolset = load_toolset([MODULE], [str(tools)])
    workers._tools = ["--tools", MODULE, "--tool-path", str(tools), "--queue", QUEUE]
    workers._env["AGENTLEDGER_TOOLS_THREADS"] = "8"  # 16 tool threads: more than the key allows
    workers.start(), workers.start()
    spec = RunSpec.model_validate(
        {
            "task": "pay",
            "tools": [MODULE],
            "tool_path": [str(tools)],
            "principal": {"id": "it", "tenant": "it-tenant"},
            "budgets": {"max_parallel_calls": CALLS},
            "model": {
                "scripted": [
                    {"tool_use": [call(f"c{i}", "pay", n=i) for i in range(CALLS)]},
                    {"end_turn": "done"},
                ]
            },
        }
    )
    started = time.monotonic()
    ids = [f"run-{i}" for i in range(RUNS)]
    for rid in ids:
        publish(client, keys, RunRequested(
            run_id=rid, request_id=rid, spec=spec, base_dir=str(workspace.parent),
            workspace=str(workspace), queue=QUEUE, toolset=toolset.fingerprint,
        ), signer=signer)  # fmt: skip
    store = cache_for(RedisEventStore(client, keys))
    deadline = time.monotonic() + 120
    left = set(ids)
    while left and time.monotonic() < deadline:
        left = {r for r in left if (s := store.load(r)) is None or s.status.live}
        time.sleep(0.25)
    took = time.monotonic() - started
    seen = counted(counter)
    with capsys.disabled():
        print(f"\n[limits] {RUNS}x{CALLS} calls, max {MAX}: peak {seen['peak']}, {took:.1f}s")
    assert not left, f"{len(left)} runs did not end\n{workers.output()}"
    states = [store.load(r) for r in ids]
    assert all(s is not None and s.status is RunStatus.COMPLETED for s in states)
    assert seen["calls"] == RUNS * CALLS, "every call ran, once"
    assert seen["now"] == 0
    assert seen["peak"] <= MAX, "never more calls inside the tool than the key allows"
    assert seen["peak"] >= 2, "the calls did run side by side"
