"""What every chaos scenario does around its fault: how big it is, the runs it
feeds (one read and three writes over two turns), waiting for them to end,
and counting what happened."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentledger.schemas.envelope import Envelope
from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.store.redis_store import RedisEventStore
from tests.chaos.kit import QUEUE, Cluster, retrying, spec, submit, use
from tests.chaos.tally import Figures, read_runs, wait_settled

MORE = 4  # how many times `n` runs a feeder told to go on `until` an event may feed


@dataclass(frozen=True)
class Size:
    runs: int = 200
    kills: int = 40
    in_flight: int = 24  # runs the kill scenario keeps under way at once (a closed loop)
    kill_every_s: float = 0.6  # on average, between two kills
    processes: int = 3
    garbage: int = 5000
    valid: int = 50
    outage_s: float = 4.0
    drain_s: float = 180.0
    # how late past the lock lease (+ 1 s) the next holder may get a frozen holder's lock:
    # a figure of `make chaos` on a quiet machine, not a bound a busy parallel suite keeps
    grant_slack_s: float = 0.5


def _workload(i: int, *, delay_s: float, write: str) -> list[dict[str, object]]:
    """One read and three writes over two turns, then the end."""
    return [
        {"tool_use": [use("r1", "chaos_read", key="a"), use("w1", write, key="a", value=str(i), delay_s=delay_s)]},
        {"tool_use": [use("w2", write, key="b", value="x", delay_s=delay_s), use("w3", write, key="c", value="y", delay_s=delay_s)]},
        {"end_turn": f"done {i}"},
    ]  # fmt: skip


def submit_runs(
    c: Cluster,
    n: int,
    tools_dir: Path,
    tag: str,
    *,
    delay_s: float = 0.02,
    write: str = "chaos_write",
    in_flight: int | None = None,
    into: dict[str, Path] | None = None,
    until: threading.Event | None = None,
) -> dict[str, Path]:
    """`n` runs (into `into`); `write` is the write tool (chaos_blind_write has
    no lookup: an outcome its worker lost would send the run to a human). With
    `in_flight`, a new run is fed only while fewer are under way: a closed loop,
    so what a run waits for is its own steps, not a backlog of the others. With
    `until`, runs go on being fed past `n` until it is set (up to `MORE` × n):
    the faults then land among live runs however fast the machine is."""
    client = c.client()
    store = c.store(client)
    workspaces: dict[str, Path] = {} if into is None else into
    live: set[str] = set()
    i = 0
    while i < n or (until is not None and not until.is_set() and i < MORE * n):
        while in_flight and len(live) >= in_flight:
            live = wait_settled(store, live, timeout_s=0)
            if len(live) >= in_flight:
                time.sleep(0.05)
        run_id = f"{tag}-{i:04d}"
        ws = c.tmp / "ws" / run_id
        ws.mkdir(parents=True)
        request = RunRequested(
            run_id=run_id, request_id=run_id, spec=spec(_workload(i, delay_s=delay_s, write=write), tools_dir),
            base_dir=str(c.tmp), workspace=str(ws), queue=QUEUE,
        )  # fmt: skip
        retrying(lambda r=request: submit(client, c.keys, r))  # type: ignore[misc]
        workspaces[run_id] = c.copy_of(run_id)  # where the run works, and its tools count
        live.add(run_id)
        i += 1
    client.close()
    return workspaces


def finish(
    f: Figures,
    c: Cluster,
    workspaces: dict[str, Path],
    faults: list[float],
    size: Size,
    began: float,
) -> Figures:
    client = c.client()
    store = c.store(client)
    wait_settled(store, workspaces, timeout_s=size.drain_s)
    f.elapsed_s = time.monotonic() - began
    records = read_runs(client, store, workspaces)
    client.close()
    f.count(records).recovery(records, faults)
    f.zeros()
    return f


def until_some_done(store: object, workspaces: dict[str, Path], *, share: float) -> None:
    """Until `share` of the runs ended (the fault then lands among live ones)."""
    want = int(len(workspaces) * share)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        left = wait_settled(store, workspaces, timeout_s=0)  # type: ignore[arg-type]
        if len(workspaces) - len(left) >= want:
            return
        time.sleep(0.1)


def wait_for(
    store: RedisEventStore, run_id: str, kind: type, timeout_s: float = 60.0
) -> Envelope[Any]:
    """The run's first event of `kind`, once it is there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = next((e for e in store.read(run_id) if isinstance(e.data, kind)), None)
        if found is not None:
            return found
        time.sleep(0.02)
    seen = " ".join(e.type for e in store.read(run_id))
    raise AssertionError(f"{run_id}: no {kind.__name__} within {timeout_s:g}s; its log: {seen}")
