"""The chaos scenarios. Each starts its own private redis-server and workers,
injects its fault, waits for every run to end or wait for a person, and
returns its figures (checked against the issue's zeros by `Figures.expect`)."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from events.types import ToolCallScheduled, ToolCallStarted, ToolCallWaiting
from schemas.envelope import Envelope
from schemas.inbox import RunRequested
from services.adapters.store.redis_store import RedisEventStore
from services.adapters.tools.toolset import fingerprint_of
from tests.chaos.garbage import INBOX_MAX_BYTES
from tests.chaos.garbage import garbage as make_garbage
from tests.chaos.kit import (
    QUEUE,
    TOOL_MODULE,
    Cluster,
    cluster,
    retrying,
    spec,
    submit,
    use,
    write_fields,
    write_inbox,
    write_tool_module,
)
from tests.chaos.tally import Figures, read_runs, wait_settled


@dataclass(frozen=True)
class Size:
    runs: int = 200
    kills: int = 40
    rate: float = 8.0  # runs a second fed to the kill scenario
    processes: int = 3
    garbage: int = 5000
    valid: int = 50
    outage_s: float = 4.0
    drain_s: float = 180.0


def _workload(i: int, *, delay_s: float, write: str) -> list[dict[str, object]]:
    """One read and three writes over two turns, then the end."""
    return [
        {"tool_use": [use("r1", "chaos_read", key="a"), use("w1", write, key="a", value=str(i), delay_s=delay_s)]},
        {"tool_use": [use("w2", write, key="b", value="x", delay_s=delay_s), use("w3", write, key="c", value="y", delay_s=delay_s)]},
        {"end_turn": f"done {i}"},
    ]  # fmt: skip


def _submit_runs(
    c: Cluster, n: int, tools_dir: Path, tag: str, *, delay_s: float = 0.02,
    write: str = "chaos_write", rate: float | None = None,
) -> dict[str, Path]:
    """`n` runs; `write` is the write tool (chaos_blind_write has no lookup: an
    outcome its worker lost would send the run to a human)."""
    client = c.client()
    workspaces: dict[str, Path] = {}
    began = time.monotonic()
    for i in range(n):
        run_id = f"{tag}-{i:04d}"
        ws = c.tmp / "ws" / run_id
        ws.mkdir(parents=True)
        request = RunRequested(
            run_id=run_id, request_id=run_id, spec=spec(_workload(i, delay_s=delay_s, write=write), tools_dir),
            base_dir=str(c.tmp), workspace=str(ws), queue=QUEUE,
        )  # fmt: skip
        retrying(lambda r=request: submit(client, c.keys, r))  # type: ignore[misc]
        workspaces[run_id] = ws
        if rate:  # fed over time, not all at once
            time.sleep(max(0.0, began + (i + 1) / rate - time.monotonic()))
    client.close()
    return workspaces


def _finish(f: Figures, c: Cluster, workspaces: dict[str, Path], faults: list[float], size: Size, began: float) -> Figures:
    client = c.client()
    store = c.store(client)
    wait_settled(store, workspaces, timeout_s=size.drain_s)
    f.elapsed_s = time.monotonic() - began
    records = read_runs(client, store, workspaces)
    client.close()
    f.count(records).recovery(records, faults)
    f.zeros()
    return f


def worker_kills(tmp: Path, size: Size) -> Figures:
    """N runs fed at `rate` runs a second while child processes of `agentledger
    workers --processes P` are SIGKILLed at random, evenly over the feeding (the
    supervisor starts each again)."""
    f = Figures("worker SIGKILLs", runs=size.runs)
    with cluster(tmp, "kills") as c:
        tools = write_tool_module(c.tmp / "tools")
        pool = c.workers(tools, processes=size.processes)
        began = time.monotonic()
        workspaces: dict[str, Path] = {}
        feeder = threading.Thread(
            target=lambda: workspaces.update(_submit_runs(c, size.runs, tools, "k", rate=size.rate))
        )
        feeder.start()
        rng = random.Random(9)
        faults: list[float] = []
        gap = size.runs / size.rate / max(1, size.kills)  # the kills spread over the feeding
        while len(faults) < size.kills:
            time.sleep(rng.uniform(0.5, 1.5) * gap)
            children = pool.children()
            if children:
                os.kill(rng.choice(children), signal.SIGKILL)
                faults.append(time.time())
        feeder.join()
        f.kills = len(faults)
        _finish(f, c, workspaces, faults, size, began)
        f.extra["restarts"] = pool.restarts()
        f.extra["runs_per_s"] = round(size.runs / f.elapsed_s, 1)
        f.expect(f"runs sent to a human: {dict(f.to_human)}", not f.to_human)
        f.expect(f"not all completed: {dict(f.ended)}", f.ended.get("completed", 0) == size.runs)
    return f


def redis_restart(tmp: Path, size: Size) -> Figures:
    """Redis SIGKILLed while runs are under way, started again from its AOF."""
    f = Figures("Redis SIGKILL + restart from AOF", runs=size.runs // 2)
    with cluster(tmp, "aof") as c:
        tools = write_tool_module(c.tmp / "tools")
        c.workers(tools, processes=size.processes)
        began = time.monotonic()
        workspaces = _submit_runs(c, f.runs, tools, "a", delay_s=0.1, write="chaos_blind_write")
        client = c.client()
        store = c.store(client)
        _until_some_done(store, workspaces, share=0.05)
        client.close()
        killed = time.time()
        c.redis.kill()
        c.redis.start()
        f.kills = 1
        f.extra["redis_down_s"] = round(time.time() - killed, 2)
        _finish(f, c, workspaces, [killed], size, began)
        f.expect(f"runs sent to a human: {dict(f.to_human)}", not f.to_human)
    return f


def redis_outage(tmp: Path, size: Size, *, freeze: bool = False) -> Figures:
    """Redis gone for a few seconds with every worker alive — killed and started
    again from its AOF after `outage_s` (connections refused), or frozen by
    SIGSTOP (connections hang): the workers hold what they know (outcomes
    included) and record it when Redis is back; no run goes to a human."""
    how = "frozen" if freeze else "down"
    f = Figures(f"Redis {how} {size.outage_s:g}s, workers alive", runs=size.runs // 2)
    with cluster(tmp, f"outage-{how}") as c:
        tools = write_tool_module(c.tmp / "tools")
        c.workers(tools, processes=size.processes)
        began = time.monotonic()
        workspaces = _submit_runs(c, f.runs, tools, "o", delay_s=0.3, write="chaos_blind_write")
        client = c.client()
        _until_some_done(c.store(client), workspaces, share=0.05)
        client.close()
        at = time.time()
        if freeze:
            c.redis.pause(size.outage_s)
        else:
            c.redis.kill()
            time.sleep(size.outage_s)
            c.redis.start()
        f.extra["outage_s"] = round(time.time() - at, 2)
        _finish(f, c, workspaces, [at], size, began)
        f.expect(f"runs sent to a human by the outage: {dict(f.to_human)}", not f.to_human)
        f.expect(f"not all completed: {dict(f.ended)}", f.ended.get("completed", 0) == f.runs)
    return f


def redis_freeze(tmp: Path, size: Size) -> Figures:
    return redis_outage(tmp, size, freeze=True)


def _until_some_done(store: object, workspaces: dict[str, Path], *, share: float) -> None:
    """Until `share` of the runs ended (the fault then lands among live ones)."""
    want = int(len(workspaces) * share)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        left = wait_settled(store, workspaces, timeout_s=0)  # type: ignore[arg-type]
        if len(workspaces) - len(left) >= want:
            return
        time.sleep(0.1)


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
            workspaces[run_id] = ws
            turns = [
                {"tool_use": [use("w", "chaos_fenced_write", key="k", store=store_file, delay_s=delay)]},
                {"end_turn": "done"},
            ]
            request = RunRequested(
                run_id=run_id, request_id=run_id, spec=spec(turns, tools), base_dir=str(c.tmp),
                workspace=str(ws), queue=QUEUE,
            )  # fmt: skip
            submit(client, c.keys, request)
            if run_id == "s-holder":
                started = _wait_for(store, run_id, ToolCallStarted)
        _wait_for(store, "s-next", ToolCallWaiting)  # queued behind the holder
        pid = int(started.data.worker.split(":")[1])
        os.kill(pid, signal.SIGSTOP)  # the holder stops renewing, mid-write
        frozen_at = time.time()
        lease_s = float(c.env()["AGENTLEDGER_LOCK_LEASE_S"])
        granted = _wait_for(store, "s-next", ToolCallScheduled, timeout_s=lease_s + 10).at
        os.kill(pid, signal.SIGCONT)
        f.kills = 1
        f.extra["next_granted_after_s"] = round(granted - frozen_at, 2)
        f.extra["lock_lease_s"] = lease_s
        client.close()
        _finish(f, c, workspaces, [frozen_at], size, began)  # the holder, thawed, ends too
        fenced = Path(store_file + ".fenced")
        f.extra["stale_writes_refused"] = len(fenced.read_text().splitlines()) if fenced.exists() else 0
        stored = json.loads(Path(store_file).read_text())
        f.extra["store_written_by"] = stored["k"]["by"]
        f.expect(
            f"the next run's write waited {granted - frozen_at:.2f}s (> lease {lease_s:g}s + 1s)",
            granted - frozen_at <= lease_s + 1.0 + 0.5,  # + one sweep interval and a busy machine's slack
        )
        f.expect("the frozen holder's stale write was not refused", f.extra["stale_writes_refused"] == 1)
        f.expect("the store does not hold the next run's write", stored["k"]["by"] == "s-next")
    return f


def _wait_for(store: RedisEventStore, run_id: str, kind: type, timeout_s: float = 60.0) -> Envelope[Any]:
    """The run's first event of `kind`, once it is there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = next((e for e in store.read(run_id) if isinstance(e.data, kind)), None)
        if found is not None:
            return found
        time.sleep(0.02)
    seen = " ".join(e.type for e in store.read(run_id))
    raise AssertionError(f"{run_id}: no {kind.__name__} within {timeout_s:g}s; its log: {seen}")


def inbox_garbage(tmp: Path, size: Size) -> Figures:
    """`garbage` bad entries of every kind (`tests.chaos.garbage`) among `valid`
    good ones, and the same request ids published again under new run ids."""
    f = Figures("inbox garbage", runs=size.valid)
    with cluster(tmp, "garbage", AGENTLEDGER_INBOX_MAX_BYTES=str(INBOX_MAX_BYTES)) as c:
        tools = write_tool_module(c.tmp / "tools")
        client = c.client()
        keys = c.keys
        rng = random.Random(5)
        workspaces: dict[str, Path] = {}
        valid: list[RunRequested] = []
        kinds: Counter[str] = Counter()
        for run_i in range(size.valid):
            run_id = f"g-{run_i:03d}"
            ws = c.tmp / "ws" / run_id
            ws.mkdir(parents=True)
            workspaces[run_id] = ws
            turns = [{"tool_use": [use("w", "chaos_write", key="a", value="1")]}, {"end_turn": "ok"}]
            valid.append(RunRequested(
                run_id=run_id, request_id=f"req-{run_id}", spec=spec(turns, tools),
                base_dir=str(c.tmp), workspace=str(ws), queue=QUEUE,
            ))  # fmt: skip
        sample = valid[0].model_dump_json()
        at = sorted(rng.sample(range(size.garbage + size.valid), size.valid))
        valid_at = dict(zip(at, valid, strict=True))
        sent: list[RunRequested] = []
        reused = 0
        for i in range(size.garbage + size.valid):
            if (request := valid_at.get(i)) is not None:
                submit(client, keys, request)
                sent.append(request)
            else:
                if sent and rng.random() < 0.01:  # an earlier request id again, new run id
                    again = rng.choice(sent).model_copy(update={"run_id": f"dup-{i}"})
                    submit(client, keys, again)  # the same request: a no-op naming the first run
                    reused += 1
                kind, entry = make_garbage(rng, sample)
                if isinstance(entry, dict):
                    write_fields(client, keys, i, entry)  # type: ignore[arg-type]
                else:
                    write_inbox(client, keys, i, entry)
                kinds[kind] += 1
        sent_garbage = sum(kinds.values())
        began = time.monotonic()
        pool = c.workers(tools, processes=1)
        _finish(f, c, workspaces, [], size, began)
        deadline = time.monotonic() + size.drain_s  # the last garbage may come after the runs
        while (pending := _pending(client, keys)) and time.monotonic() < deadline:
            time.sleep(0.2)
        f.elapsed_s = time.monotonic() - began
        rejected, unreasoned = _rejections(client, keys)
        dups = sum(1 for _ in client.scan_iter(match=f"{keys.prefix}:*run:dup-*", count=1000))
        client.close()
        restarts = pool.tail(1 << 30).count("starting it again")
        f.extra.update(
            garbage=sent_garbage, kinds=len(kinds), request_ids_reused=reused, rejected=rejected,
            rejected_without_reason=unreasoned, pending=pending, intake_restarts=restarts,
            duplicate_runs=dups, entries_per_s=round((sent_garbage + size.valid) / f.elapsed_s),
        )  # fmt: skip
        f.expect(f"created {f.created} of {size.valid}", f.created == size.valid)
        f.expect(f"rejected {rejected} of {sent_garbage}", rejected == sent_garbage)
        f.expect(f"{unreasoned} rejected without a reason", unreasoned == 0)
        f.expect(f"{pending} entries pending", pending == 0)
        f.expect(f"{restarts} intake restarts", restarts == 0)
        f.expect(f"{dups} runs from a reused request_id", dups == 0)
    return f


def _rejections(client: object, keys: object) -> tuple[int, int]:
    total = unreasoned = 0
    for part in range(keys.inbox_partitions):  # type: ignore[attr-defined]
        stream = keys.rejected(part)  # type: ignore[attr-defined]
        last = "-"
        while True:
            batch = client.xrange(stream, min=last, count=1000)  # type: ignore[attr-defined]
            batch = [b for b in batch if b[0].decode() != last]
            if not batch:
                break
            for _id, fields in batch:
                total += 1
                unreasoned += not fields.get(b"reason")
            last = batch[-1][0].decode()
    return total, unreasoned


def _pending(client: object, keys: object) -> int:
    n = 0
    for part in range(keys.inbox_partitions):  # type: ignore[attr-defined]
        stream = keys.inbox(part)  # type: ignore[attr-defined]
        n += client.xlen(stream)  # type: ignore[attr-defined]
    return int(n)


USER_TOOLS = '''"""{owner}'s tools: the same module and tool names as the other user's."""

import os
from pathlib import Path

from services.tools import ToolContext, tool


@tool(writes=lambda a, ws: [f"note:{{ws}}"], timeout_s=10)
def note(text: str, ctx: ToolContext) -> dict:
    """Write a note."""
    with open(Path(ctx.workspace, "truth.log"), "a") as f:
        f.write(f"{{ctx.op_key}} {{ctx.call_id}} {{os.getpid()}} {owner}\\n")
    return {{"by": "{owner}"}}
'''


def two_users(tmp: Path, size: Size) -> Figures:
    """Two users' same-named tool modules served on one Redis and one queue name:
    every call runs the code of the run's own user."""
    per_user = max(4, size.runs // 20)
    f = Figures("two users, same-named tools", runs=2 * per_user)
    with cluster(tmp, "users") as c:
        client = c.client()
        workspaces: dict[str, Path] = {}
        owners: dict[str, str] = {}
        for owner in ("carol", "dave"):
            folder = c.tmp / owner
            write_tool_module(folder, USER_TOOLS.format(owner=owner), name="tools")
            c.workers(folder, processes=1, queue="shared", module="tools")
            toolset = fingerprint_of(["tools"], [str(folder)])
            for i in range(per_user):
                run_id = f"u-{owner}-{i:02d}"
                ws = c.tmp / "ws" / run_id
                ws.mkdir(parents=True)
                workspaces[run_id], owners[run_id] = ws, owner
                turns = [
                    {"tool_use": [use(f"n{j}", "note", text=str(j))]} for j in range(3)
                ] + [{"end_turn": "ok"}]
                request = RunRequested(
                    run_id=run_id, request_id=run_id, spec=spec(turns, folder, tools="tools"),
                    base_dir=str(folder), workspace=str(ws), queue="shared", toolset=toolset,
                )  # fmt: skip
                submit(client, c.keys, request, i)
        client.close()
        _finish(f, c, workspaces, [], size, time.monotonic())
        calls = cross = 0
        for run_id, ws in workspaces.items():
            truth = ws / "truth.log"
            for line in truth.read_text().splitlines() if truth.exists() else []:
                calls += 1
                cross += line.split()[-1] != owners[run_id]
        f.extra.update(calls=calls, cross_executions=cross)
        f.expect(f"{cross} calls ran the other user's code", cross == 0)
        f.expect(f"{calls} calls ran, expected {3 * f.runs}", calls == 3 * f.runs)
    return f


SCENARIOS = {
    "kills": worker_kills,
    "aof": redis_restart,
    "sigstop": lock_holder_stopped,
    "garbage": inbox_garbage,
    "users": two_users,
    "outage": redis_outage,
    "freeze": redis_freeze,
}


def new_tag() -> str:
    return uuid.uuid4().hex[:6]


_ = threading  # the scenarios run one after another; nothing here is shared
_ = TOOL_MODULE
