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


BUSY_MODULE = "busy_tools"
BUSY_SOURCE = '''"""A service that allows one call at a time and answers its first call "rate
limited, retry after {retry_s} s"; every call's start is written down by the tool."""

import fcntl
import json
import os
import time

from agentledger import ToolFailure, tool

LOG = {log!r}


@tool(read_only=True, limits=[{{"key": "svc:busy", "max": 1}}])
def busy(n: int) -> str:
    """Ask the busy service."""
    with open(LOG, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        first = not f.read().strip()
        f.write(json.dumps({{"at": time.time(), "n": n, "limited": first}}) + "\\n")
    if first:
        raise ToolFailure("rate_limited", "slow down", retry_after_s={retry_s})
    time.sleep(0.01)
    return "ok"
'''
RETRY_S = 2.0


@pytest.mark.slow
def test_after_a_rate_limited_answer_no_run_calls_the_service_before_its_retry_after(
    client: redis.Redis,
    keys: Keys,
    workers: Workers,  # noqa: F811 -- the fixture
    tmp_path: Path,
    workspace: Path,
    signer: Signer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """6 runs of 2 calls to a service with `max: 1` on two workers: the first call is
    answered "retry after 2 s"; every later call starts at least 2 s after that answer
    (the one slot is held until the key is closed: nothing slips in between), the
    calls that waited record that they back off, and every run completes."""
    from agentledger.events.types import ToolCallBackedOff
    from agentledger.services.entrypoints.summary import run_summary, waits_line

    tools = tmp_path / "busytools"
    tools.mkdir()
    log = tmp_path / "calls.jsonl"
    (tools / f"{BUSY_MODULE}.py").write_text(BUSY_SOURCE.format(log=str(log), retry_s=RETRY_S))
    toolset = load_toolset([BUSY_MODULE], [str(tools)])
    workers._tools = ["--tools", BUSY_MODULE, "--tool-path", str(tools), "--queue", QUEUE]
    workers.start(), workers.start()
    spec = RunSpec.model_validate(
        {
            "task": "busy",
            "tools": [BUSY_MODULE],
            "tool_path": [str(tools)],
            "principal": {"id": "it", "tenant": "it-tenant"},
            "model": {
                "scripted": [
                    {"tool_use": [call(f"c{i}", "busy", n=i) for i in range(2)]},
                    {"end_turn": "done"},
                ]
            },
        }
    )
    ids = [f"busy-{i}" for i in range(6)]
    for rid in ids:
        publish(client, keys, RunRequested(
            run_id=rid, request_id=rid, spec=spec, base_dir=str(workspace.parent),
            workspace=str(workspace), queue=QUEUE, toolset=toolset.fingerprint,
        ), signer=signer)  # fmt: skip
    store = cache_for(RedisEventStore(client, keys))
    deadline = time.monotonic() + 90
    left, said = set(ids), None
    while left and time.monotonic() < deadline:
        for rid in sorted(left):
            s = store.load(rid)
            if s is None:
                continue
            if not s.status.live:
                left.discard(rid)
            shown = [c["waits"] for c in run_summary(s)["tool_calls"] if "waits" in c]
            if said is None and any(w["backed_off_until"] for w in shown):
                said = waits_line(next(w for w in shown if w["backed_off_until"]))
        time.sleep(0.05)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    [answer] = [c for c in calls if c["limited"]]
    later = sorted(c["at"] - answer["at"] for c in calls if not c["limited"])
    with capsys.disabled():
        print(
            f"\n[limits] after 'retry after {RETRY_S:g}s' the next call came {later[0]:.2f}s later"
        )
        print(f"[limits] status of a waiting call: {said}")
    assert not left, f"{len(left)} runs did not end\n{workers.output()}"
    assert len(calls) == 12, "every call ran once"
    assert all(at >= RETRY_S for at in later), f"a call within {RETRY_S}s: {later}"
    backed = [
        e.data for rid in ids for e in RedisEventStore(client, keys).read(rid)
        if isinstance(e.data, ToolCallBackedOff)
    ]  # fmt: skip
    assert backed, "the calls that waited recorded the back-off"
    assert all(b.keys == ("limit:svc:busy",) for b in backed)
    assert said is not None and said.startswith("waits for limit:svc:busy (")
    assert " of 1 holding)" in said
    assert "backed off until" in said


def test_the_metrics_show_each_keys_holders_waiters_and_back_off(
    client: redis.Redis, prefix: str
) -> None:
    from agentledger.events.lock_step import LockAsk
    from agentledger.events.locks import Mode
    from agentledger.services.adapters.locks.redis_locks import RedisLocks
    from agentledger.services.adapters.metrics import scrape

    locks = RedisLocks(client, Keys(prefix, 1, lock_partitions=3), lease_s=30.0)
    pay, busy = "limit:svc:pay", "limit:svc:busy"
    asks = [LockAsk(f"r{i}", "c", f"r{i}/c/1.0", {pay: Mode.SLOT}, {pay: 2}) for i in range(5)]
    assert len(locks.enqueue(asks, [None] * 5).grants) == 2
    locks.close({busy: 60.0})
    collector = scrape.RedisCollector(
        client, Keys(prefix, 1), lambda: range(0), [], lambda ids: [], locks.usage
    )
    got = {
        (family.name, sample.labels.get("key")): sample.value
        for family in collector.collect()
        for sample in family.samples
        if family.name.startswith("agentledger_limit")
    }
    assert got[("agentledger_limit_holders", pay)] == 2
    assert got[("agentledger_limit_waiters", pay)] == 3
    assert got[("agentledger_limit_closed_until_seconds", pay)] == 0
    assert got[("agentledger_limit_closed_until_seconds", busy)] > time.time() + 50
    many = {f"limit:k{i}": (1, 0, None) for i in range(scrape.MAX_KEYS + 5)}
    shown = scrape.busiest(many)
    assert len(shown) == scrape.MAX_KEYS + 1 and shown["(others)"] == (5, 0, None)
