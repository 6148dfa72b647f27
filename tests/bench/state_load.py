"""W5, part one: how long loading a run's state takes as its log grows, the
whole log folded vs snapshot + tail. The logs are made from a real run's log:
its second turn (model request, reply, proposal, validation, claim, result)
repeated with the turn number and call id moved on, cut at 100 … 100,000
events, so the state grows as a real run's does (every turn stays in the
history). Each load is timed five ways: the whole log read and folded (what
every load did before); a run's first load in a new worker process (snapshot
SNAP_BEHIND events back + the events after it, the spec validated, nothing
warm but what a worker prepares at start), in processes of its own
(`tests.bench.first_load`); the same load by a fresh cache in this process,
warm (its spec validated once per process, its code run before); a process
holding the state SNAP_BEHIND events back (its cache + the tail); and one
holding the current state (the check only). The new process's first load is
timed again on the same log with a Claude spec instead of the scripted one: a
bench run's spec holds its whole script (~20 kB for 200 calls), which the first
load validates, where a real Claude run's spec holds its settings only."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from statistics import median
from typing import Any

from agentledger.events.fold import fold
from agentledger.events.state import RunState
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import AnthropicModel, AnthropicSettings
from agentledger.services.adapters.store.port import Snapshot
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.handlers.state_cache import SNAPSHOT_EVERY, StateCache, decode, encode
from agentledger.services.settings import environ_for_children
from tests.bench.harness import REPO_ROOT, Bench, BenchError

SNAP_BEHIND = SNAPSHOT_EVERY // 2  # events from the snapshot (or cached state) to the log's end
CHUNK = 2000  # events per append while the logs are written
NEVER = 10**12  # a cache that writes no snapshots of its own while it is timed
NEW_PROCESSES = 3  # new processes timed, each once, per log size
_ENVELOPE = Envelope[Any]
CLAUDE = AnthropicModel(
    anthropic=AnthropicSettings(
        model="claude-sonnet-4-5",
        system="You work on the files of one repository. Call a tool for every fact you use. "
        * 12,  # ~1 kB of instructions
    )
)


def measure(
    bench: Bench, prefix: str, template: list[Envelope[Any]], sizes: tuple[int, ...], reps: int
) -> dict[str, dict[str, Any]]:
    store = bench.store(prefix)
    head, block = _turn_blocks(template)
    results = {}
    for n in sizes:
        run_id = f"load-{n}-{uuid.uuid4().hex[:6]}"
        log = synthetic_log(run_id, head, block, n)
        results[str(n)] = _measure_one(store, run_id, log, reps if n < 50_000 else min(reps, 3))
        del log
        loads = [_first_load(bench, prefix, run_id, n) for _ in range(NEW_PROCESSES)]
        results[str(n)]["first_load_ms"] = median(total for total, _ in loads)
        results[str(n)]["first_load_spec_ms"] = median(spec for _, spec in loads)
        claude_id = f"load-{n}-claude-{uuid.uuid4().hex[:6]}"
        _store_log(store, synthetic_log(claude_id, _asking_claude(head), block, n))
        loads = [_first_load(bench, prefix, claude_id, n) for _ in range(NEW_PROCESSES)]
        results[str(n)]["first_load_claude_ms"] = median(total for total, _ in loads)
        results[str(n)]["first_load_claude_spec_ms"] = median(spec for _, spec in loads)
    return results


def _asking_claude(head: list[Envelope[Any]]) -> list[Envelope[Any]]:
    """The head with its RunCreated's spec asking Claude (CLAUDE) instead of playing
    the script: the rest of the log is the same."""
    created, *rest = head
    spec = created.data.spec.model_copy(update={"model": CLAUDE})
    data = created.data.model_copy(update={"spec": spec})
    return [created.model_copy(update={"data": data}), *rest]


def _first_load(bench: Bench, prefix: str, run_id: str, events: int) -> tuple[float, float]:
    """The first load of `run_id` in a new process (`tests.bench.first_load`), and the
    part of it spent validating the run's spec."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.first_load", bench.server.url, prefix, run_id],
        env=environ_for_children(bench.settings.with_(prefix=prefix)),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise BenchError(f"the new process's load of {run_id!r} failed:\n{done.stderr[-2000:]}")
    reply = json.loads(done.stdout.strip().splitlines()[-1])
    if reply["seq"] != events:
        raise BenchError(f"the new process loaded {run_id!r} at seq {reply['seq']}, not {events}")
    return float(reply["first_load_ms"]), float(reply["spec_ms"])


def _measure_one(
    store: RedisEventStore, run_id: str, log: list[Envelope[Any]], reps: int
) -> dict[str, Any]:
    n = len(log)
    older, snap = _store_log(store, log)

    full = [_time(lambda: fold(store.read(run_id))) for _ in range(reps)]
    cold = [_time(lambda: StateCache(store, snapshot_every=NEVER).load(run_id)) for _ in range(5)]
    cache = StateCache(store, snapshot_every=NEVER)
    tail = []
    for _ in range(5):
        cache.forget(run_id)
        cache.appended(run_id, older, older.last_event_id)
        tail.append(_time(lambda: cache.load(run_id)))
    current = [_time(lambda: cache.load(run_id)) for _ in range(5)]
    state = cache.load(run_id)
    if state != fold(log):
        raise BenchError(f"snapshot + tail of {run_id!r} is not the fold of its log")
    return {
        "events": n,
        "full_ms": median(full),
        "snapshot_tail_ms": median(cold),  # a fresh cache in this (warm) process
        "cache_tail_ms": median(tail),
        "cache_check_ms": median(current),
        "snapshot_kb": len(snap.state) / 1024,  # the header a new process reads
        "pages_kb": sum(len(b) for b in snap.pages.values()) / 1024,  # read only on demand
        "encode_ms": _time(
            lambda: encode(older, pages_saved=len(older.history) // 64, with_spec=False)
        ),
        "decode_ms": _time(lambda: decode(snap, run_id, store)),
        "turns": len(older.history) + 1,
    }


def _store_log(store: RedisEventStore, log: list[Envelope[Any]]) -> tuple[RunState, Snapshot]:
    """`log` appended, with a snapshot SNAP_BEHIND events from its end (as a writer
    saves one): the state folded there, and the snapshot."""
    run_id, behind = log[0].run_id, max(1, len(log) - SNAP_BEHIND)
    _append_all(store, run_id, log[:behind])
    older = fold(log[:behind])
    assert older is not None
    snap = encode(older, pages_saved=0, with_spec=True)
    store.save_snapshot(run_id, snap)
    _append_all(store, run_id, log[behind:], after=behind)
    return older, snap


def _time(op: Any) -> float:
    started = time.perf_counter()
    op()
    return (time.perf_counter() - started) * 1000


def _append_all(
    store: RedisEventStore, run_id: str, log: list[Envelope[Any]], after: int = 0
) -> None:
    for i in range(0, len(log), CHUNK):
        store.append(run_id, log[i : i + CHUNK], expected_seq=after + i, live=False)


def _turn_blocks(
    template: list[Envelope[Any]],
) -> tuple[list[Envelope[Any]], list[Envelope[Any]]]:
    """The template up to its second turn, and the events of that turn (from its
    ModelRequested to the next)."""
    starts = [i for i, e in enumerate(template) if e.type == "ModelRequested"]
    if len(starts) < 3:
        raise BenchError("the template run needs at least two tool-call turns")
    return template[: starts[1]], template[starts[1] : starts[2]]


def synthetic_log(
    run_id: str, head: list[Envelope[Any]], block: list[Envelope[Any]], n: int
) -> list[Envelope[Any]]:
    """The head (RunCreated, turn 1), then the block once per turn (2, 3, …), cut at `n`."""
    events: list[Any] = [e.data for e in head]
    turn = 2
    while len(events) < n:
        events += [_moved(e.data, turn) for e in block]
        turn += 1
    return [
        _ENVELOPE.model_construct(
            id=uuid.uuid4().hex,
            run_id=run_id,
            seq=i + 1,
            type=e.type,
            at=1.7e9 + i / 1000,
            source="bench",
            causation_id=None,
            v=1,
            data=e,
        )  # fmt: skip
        for i, e in enumerate(events[:n])
    ]


def _moved(event: Any, turn: int) -> Any:
    """The template's turn-2 event as turn `turn`'s: turn numbers and call ids moved on."""
    return type(event).model_validate(_renumber(event.model_dump(), turn))


def _renumber(value: Any, turn: int) -> Any:
    match value:
        case dict():
            return {k: turn if k == "turn" else _renumber(v, turn) for k, v in value.items()}
        case list() | tuple():
            return type(value)(_renumber(v, turn) for v in value)
        case "c2":
            return f"c{turn}"
    return value
