"""W5, part two: a worker process SIGKILLed in the middle of a run, and how
long until the run moves again and until it completes, with the default
settings (the sweeper re-drives a run idle for `lease_s`, the broker hands a
dead consumer's messages on after `broker_claim_idle_s`). Two moments to die:
holding a tool call (claimed with ToolCallStarted: nobody may assume it did
not run until the claim's deadline, the tool's timeout + the claim grace, or,
for a read as here, until its worker is proven dead: silent past the member ttl
and its process gone), and
holding a model call (claimed with ModelRequested until its lease ends)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from agentledger.events.commands import Pool as CommandPool
from agentledger.schemas.spec import ScriptedTurn
from agentledger.services.adapters.broker.streams_queue import GROUP
from tests.bench.harness import Bench, BenchError, Follower, Pool
from tests.bench.plan import kill_spec, request_for

DIE_AT = 3  # the turn whose tool call (or model call) the worker dies holding
CALLS = 6
MODEL_DELAY_S = 1.5


def measure(bench: Bench, prefix: str, holding: str) -> dict[str, Any]:
    """One run on two worker processes; the one holding `holding` ("tool" or "model") is killed."""
    spec = kill_spec(sleep_at=DIE_AT, calls=CALLS)
    if holding == "model":  # the turn's call is a no-op; its model reply takes a while
        turns = list(spec.model.scripted)  # type: ignore[union-attr]
        slow = turns[DIE_AT - 1].tool_use[0].model_copy(update={"name": "bench_noop", "input": {}})  # type: ignore[index]
        turns[DIE_AT - 1] = ScriptedTurn(tool_use=(slow,), delay_s=MODEL_DELAY_S)
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"scripted": tuple(turns)})}
        )
    request = request_for(spec)
    run_id = str(request.run_id)
    with bench.workers(prefix, 2) as pool:
        follow = Follower(bench.client, pool.keys, bench.signer)
        follow.submit(pool.keys, [request])
        store = bench.store(prefix)
        seq, pid = _await_hold(bench, pool, run_id, holding)
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        moved_at = _await_after(store, run_id, seq, timeout_s=60)
        ended_at = follow.wait([run_id], timeout_s=60)[run_id]
    after = store.read(run_id, after_seq=seq)
    return {
        "holding": holding,
        "resume_s": moved_at - killed_at,
        "complete_s": ended_at - killed_at,
        "next_event": after[0].type if after else None,
    }


def _await_hold(bench: Bench, pool: Pool, run_id: str, holding: str) -> tuple[int, int]:
    """The seq of the claim, and the pid of the worker process holding it."""
    store = bench.store(pool.keys.prefix)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for e in store.read(run_id):
            if holding == "tool" and e.type == "ToolCallStarted" and e.data.call_id == f"c{DIE_AT}":
                return e.seq, int(e.data.worker.rsplit(":", 2)[1])  # host:pid:nonce
            if holding == "model" and e.type == "ModelRequested" and e.data.turn == DIE_AT:
                return e.seq, _model_consumer_pid(bench, pool, run_id)
        time.sleep(0.005)
    raise BenchError(f"run {run_id!r} never reached turn {DIE_AT}'s {holding} call")


def _model_consumer_pid(bench: Bench, pool: Pool, run_id: str) -> int:
    created = bench.store(pool.keys.prefix).read(run_id)[0].data
    stream = pool.keys.queue(
        pool.keys.shard(run_id), created.queue, created.toolset, CommandPool.MODEL
    )
    pending: Any = bench.client.xpending_range(stream, GROUP, min="-", max="+", count=10)
    if not pending:
        raise BenchError(f"no model message of {run_id!r} is pending on {stream!r}")
    newest = pending[-1]  # acks ride on a consumer's next read: older entries may still show
    pid = int(newest["consumer"].decode().split(":")[1])
    if pid not in pool.pids:
        raise BenchError(f"the model call is held by {pid}, not one of {pool.pids}")
    return pid


def _await_after(store: Any, run_id: str, seq: int, *, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        after = store.read(run_id, after_seq=seq)
        if after:
            return float(after[0].at)
        time.sleep(0.01)
    raise BenchError(f"run {run_id!r} did not move within {timeout_s:g}s of the kill")
