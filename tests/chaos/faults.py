"""Scenarios of processes that die or freeze: worker processes SIGKILLed at
random, Redis killed and restarted from its AOF, Redis gone or frozen for a few
seconds with the workers alive, a lock holder frozen mid-write."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import redis

from agentledger.events.types import ToolCallScheduled, ToolCallStarted, ToolCallWaiting
from agentledger.schemas.inbox import RunRequested
from tests.chaos.kit import QUEUE, Cluster, cluster, spec, submit, use, write_tool_module
from tests.chaos.runs import Size, finish, submit_runs, until_some_done, wait_for
from tests.chaos.tally import Figures, wait_settled

# A redis-server SIGKILLed with `appendfsync everysec` can lose events it acknowledged:
# while a background fsync is slow (a busy disk) it holds its AOF write back for up to
# 2 s and still replies. The zeros these scenarios assert across the kill (no claim,
# no ledger entry forgotten) are promised for acknowledged writes on disk: `always`.
KILLED_REDIS_FSYNC = "always"


def worker_kills(tmp: Path, size: Size) -> Figures:
    """N runs or more, `in_flight` at a time, while child processes of `agentledger
    workers --processes P` are SIGKILLed at random every `kill_every_s` or so
    (the supervisor starts each again): runs are fed until the last kill."""
    f = Figures("worker SIGKILLs", runs=size.runs)
    with cluster(tmp, "kills") as c:
        tools = write_tool_module(c.tmp / "tools")
        pool = c.workers(tools, processes=size.processes)
        began = time.monotonic()
        workspaces: dict[str, Path] = {}
        # the feeder goes on until the last kill: a fast machine would end the runs first
        killed_all = threading.Event()
        feeder = threading.Thread(
            target=submit_runs, args=(c, size.runs, tools, "k"),
            kwargs={"in_flight": size.in_flight, "into": workspaces, "until": killed_all},
        )  # fmt: skip
        feeder.start()
        rng = random.Random(9)
        faults: list[float] = []
        client = c.client()
        store = c.store(client)
        left: set[str] | None = None  # runs not ended once the feeding is over
        while len(faults) < size.kills:
            time.sleep(rng.uniform(0.5, 1.5) * size.kill_every_s)
            if not feeder.is_alive():
                left = wait_settled(store, workspaces if left is None else left, timeout_s=0)
                if not left:
                    break  # nothing under way: a kill now would test nothing
            serving = _serving(client, c, pool.children())
            if serving:
                try:
                    os.kill(rng.choice(serving), signal.SIGKILL)
                except ProcessLookupError:
                    continue  # gone since it was listed (the last victim, still beating): no fault
                faults.append(time.time())
        killed_all.set()
        client.close()
        feeder.join()
        f.runs = len(workspaces)
        f.kills = len(faults)
        finish(f, c, workspaces, faults, size, began)
        f.extra["restarts"] = pool.restarts()
        f.extra["runs_per_s"] = round(f.runs / f.elapsed_s, 1)
        f.expect(f"{f.kills} kills of {size.kills}: the runs ended first", f.kills == size.kills)
        f.expect(f"runs sent to a human: {dict(f.to_human)}", not f.to_human)
        f.expect(f"not all completed: {dict(f.ended)}", f.ended.get("completed", 0) == f.runs)
    return f


def _serving(client: redis.Redis, c: Cluster, children: list[int]) -> list[int]:
    """The children that serve (their tools pool beats): a process killed while it
    still boots holds no work, and killing it tests nothing."""
    pids: set[int] = set()
    for key in client.scan_iter(match=f"{c.keys.prefix}:members:*:tools", count=100):
        pids |= {int(m.split(b":")[1]) for m in client.zrange(key, 0, -1)}
    return [p for p in children if p in pids]


def redis_restart(tmp: Path, size: Size) -> Figures:
    """Redis SIGKILLed while runs are under way, started again from its AOF."""
    f = Figures("Redis SIGKILL + restart from AOF", runs=size.runs // 2)
    with cluster(tmp, "aof", fsync=KILLED_REDIS_FSYNC) as c:
        tools = write_tool_module(c.tmp / "tools")
        c.workers(tools, processes=1)
        began = time.monotonic()
        workspaces = submit_runs(c, f.runs, tools, "a", delay_s=0.1, write="chaos_blind_write")
        client = c.client()
        store = c.store(client)
        until_some_done(store, workspaces, share=0.05)
        client.close()
        killed = time.time()
        c.redis.kill()
        c.redis.start()
        f.kills = 1
        f.extra["redis_down_s"] = round(time.time() - killed, 2)
        finish(f, c, workspaces, [killed], size, began)
        f.expect(f"runs sent to a human: {dict(f.to_human)}", not f.to_human)
    return f


def redis_outage(tmp: Path, size: Size, *, freeze: bool = False) -> Figures:
    """Redis gone for a few seconds with every worker alive — killed and started
    again from its AOF after `outage_s` (connections refused), or frozen by
    SIGSTOP (connections hang): the workers hold what they know (outcomes
    included) and record it when Redis is back; no run goes to a human."""
    how = "frozen" if freeze else "down"
    f = Figures(f"Redis {how} {size.outage_s:g}s, workers alive", runs=size.runs // 2)
    with cluster(tmp, f"outage-{how}", fsync="everysec" if freeze else KILLED_REDIS_FSYNC) as c:
        tools = write_tool_module(c.tmp / "tools")
        c.workers(tools, processes=1)
        began = time.monotonic()
        workspaces = submit_runs(c, f.runs, tools, "o", delay_s=0.3, write="chaos_blind_write")
        client = c.client()
        until_some_done(c.store(client), workspaces, share=0.05)
        client.close()
        at = time.time()
        if freeze:
            c.redis.pause(size.outage_s)
        else:
            c.redis.kill()
            time.sleep(size.outage_s)
            c.redis.start()
        f.extra["outage_s"] = round(time.time() - at, 2)
        finish(f, c, workspaces, [at], size, began)
        f.expect(f"runs sent to a human by the outage: {dict(f.to_human)}", not f.to_human)
        f.expect(f"not all completed: {dict(f.ended)}", f.ended.get("completed", 0) == f.runs)
    return f


def redis_freeze(tmp: Path, size: Size) -> Figures:
    return redis_outage(tmp, size, freeze=True)


def lock_holder_stopped(tmp: Path, size: Size) -> Figures:
    """A worker SIGSTOPped while its write holds a lock shared with another run:
    the lock passes on after its lease, and the frozen holder's late write is
    refused by its stale fencing token."""
    f = Figures("SIGSTOPped lock holder", runs=2)
    with cluster(tmp, "sigstop") as c:
        tools = write_tool_module(c.tmp / "tools")
        c.workers(tools, processes=2)
        store_file = str(c.tmp / "shared-store.json")
        client = c.client()
        store = c.store(client)
        began = time.monotonic()
        workspaces = {}
        for run_id, delay in (("s-holder", 3.0), ("s-next", 0.0)):
            ws = c.tmp / "ws" / run_id
            ws.mkdir(parents=True)
            workspaces[run_id] = c.copy_of(run_id)  # where the run works, and its tools count
            turns = [
                {
                    "tool_use": [
                        use("w", "chaos_fenced_write", key="k", store=store_file, delay_s=delay)
                    ]
                },
                {"end_turn": "done"},
            ]
            request = RunRequested(
                run_id=run_id, request_id=run_id, spec=spec(turns, tools), base_dir=str(c.tmp),
                workspace=str(ws), queue=QUEUE,
            )  # fmt: skip
            submit(client, c.keys, request)
            if run_id == "s-holder":
                started = wait_for(store, run_id, ToolCallStarted)
        wait_for(store, "s-next", ToolCallWaiting)  # queued behind the holder
        pid = int(started.data.worker.split(":")[1])
        os.kill(pid, signal.SIGSTOP)  # the holder stops renewing, mid-write
        frozen_at = time.time()
        lease_s = float(c.env()["AGENTLEDGER_LOCK_LEASE_S"])
        granted = wait_for(store, "s-next", ToolCallScheduled, timeout_s=lease_s + 10).at
        os.kill(pid, signal.SIGCONT)
        f.kills = 1
        f.extra["next_granted_after_s"] = round(granted - frozen_at, 2)
        f.extra["lock_lease_s"] = lease_s
        client.close()
        finish(f, c, workspaces, [frozen_at], size, began)  # the holder, thawed, ends too
        fenced = Path(store_file + ".fenced")
        f.extra["stale_writes_refused"] = (
            len(fenced.read_text().splitlines()) if fenced.exists() else 0
        )
        stored = json.loads(Path(store_file).read_text())
        f.extra["store_written_by"] = stored["k"]["by"]
        f.expect(
            f"the next run's write waited {granted - frozen_at:.2f}s (> lease {lease_s:g}s + 1s)",
            granted - frozen_at
            <= lease_s + 1.0 + size.grant_slack_s,  # + one sweep interval and some slack
        )
        f.expect(
            "the frozen holder's stale write was not refused", f.extra["stale_writes_refused"] == 1
        )
        f.expect("the store does not hold the next run's write", stored["k"]["by"] == "s-next")
    return f
