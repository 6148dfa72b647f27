"""The bench's rows: each figure's median over the repetitions, every value,
the durability it was measured at, and side-by-side ratios (to the blocking
stream round trip, and of each peer to agentledger); printed as a table and
written, with the raw figures, as JSON."""

from __future__ import annotations

from statistics import median
from typing import Any

from tests.bench.admission import RATE
from tests.bench.peers import PEERS
from tests.bench.plan import READ_S, WINDOW, Plan
from tests.bench.state_load import SNAP_BEHIND

OURS = "agentledger"
Row = dict[str, Any]


def rows(raw: dict[str, Any], plan: Plan, durability: str) -> list[Row]:
    out: list[Row] = []
    hop = median(_col(raw["floor"], "stream_rtt_ms"))

    def add(
        workload: str, measure: str, system: str, dur: str, unit: str, values: list[float]
    ) -> None:
        if values:
            m = median(values)
            x_hop = m / hop if unit in ("ms", "ms/call", "ms/run") else None
            out.append(dict(workload=workload, measure=measure, system=system, durability=dur,
                            unit=unit, median=m, values=values, x_stream_hop=x_hop))  # fmt: skip

    always = "Redis AOF always"
    for key, measure, system, dur in FLOOR:
        reps = raw["floor_always"] if dur == always else raw["floor"]
        add("F", measure, system, dur or durability, "ms", _col(reps, key))

    first, last = f"1-{WINDOW}", f"{plan.calls - WINDOW + 1}-{plan.calls}"
    systems = [(OURS, durability, [r["long_run"] for r in raw["ours"]])]
    systems.append((OURS, always, [r["long_run"] for r in raw["ours_always"]]))
    systems += [(PEERS[k][0], PEERS[k][1], _ran(v)) for k, v in raw["peers"].items()]
    w1 = [
        ("ms_per_call", f"ms per tool call, 1 run x {plan.calls} calls", "ms/call"),
        ("first_turns_ms", f"turn time, calls {first}", "ms"),
        ("last_turns_ms", f"turn time, calls {last}", "ms"),
        ("growth", f"growth ratio ({last} / {first})", "ratio"),
    ]
    for system, dur, runs in systems:
        for key, measure, unit in w1:
            add("W1", measure, system, dur, unit, _col(runs, key))
    for dur, reps in ((durability, raw["ours"]), (always, raw["ours_always"])):
        for key, measure, unit in COSTS:
            add(
                "W1",
                f"{measure} per tool call",
                OURS,
                dur,
                unit,
                _col([r["long_run"] for r in reps], key),
            )

    embedded = raw.get("embedded", [])
    run_cmd = "`agentledger run` (embedded, following)"
    for key, measure, unit in EMBEDDED:
        add("W1", measure.format(calls=plan.calls, cmd=run_cmd), OURS, durability, unit,
            _col(embedded, key))  # fmt: skip

    snaps = raw.get("snapshots", [])
    for key, measure, unit in SNAPSHOTS:
        add("S", measure, OURS, "snapshot folder", unit, _col(snaps, key))

    reads = [r["parallel_reads"] for r in raw["ours"] if "parallel_reads" in r]
    if reads:
        what = f"{reads[0]['reads']} independent reads of {READ_S:g} s in one turn"
        add("P", f"{what}: all at once", OURS, durability, "s", _col(reads, "parallel_s"))
        add("P", f"{what}: one at a time", OURS, durability, "s", _col(reads, "serial_s"))
        add("P", "speed-up of parallel reads", OURS, durability, "ratio", _col(reads, "speedup"))

    w2 = f"ms per run, {plan.runs} runs x 1 call"
    add(
        "W2",
        w2,
        OURS,
        durability,
        "ms/run",
        _col([r["many_runs"] for r in raw["ours"]], "ms_per_run"),
    )
    for k, v in raw["peers"].items():
        add("W2", w2, PEERS[k][0], PEERS[k][1], "ms/run", _col(_ran(v), "ms_per_run"))
    for key, measure, unit in COSTS:
        add(
            "W2",
            f"{measure} per run",
            OURS,
            durability,
            unit,
            _col([r["many_runs"] for r in raw["ours"]], key),
        )

    runs, calls = plan.concurrent
    for p in (1, 2):
        label = f"{runs} runs x {calls} calls, {p} process{'es' if p > 1 else ''}"
        for key, measure, unit in W3:
            add(
                "W3",
                f"{measure}, {label}",
                OURS,
                durability,
                unit,
                _col(raw[f"concurrent_{p}p"], key),
            )
        tail = [r["p99_turn_ms"] / r["p50_turn_ms"] for r in raw[f"concurrent_{p}p"]]
        add("W3", f"p99 / p50 turn latency, {label}", OURS, durability, "ratio", tail)
    if raw.get("concurrent_1p_metrics"):
        with_metrics = _col(raw["concurrent_1p_metrics"], "calls_per_s")
        add("W3", f"tool calls/s, {runs} runs x {calls} calls, 1 process, --metrics-port on",
            OURS, durability, "calls/s", with_metrics)  # fmt: skip
        add("W3", "metrics cost: calls/s with metrics / without, 1 process", OURS, durability,
            "ratio", [m / b for b, m in zip(_col(raw["concurrent_1p"], "calls_per_s"), with_metrics, strict=True)])  # fmt: skip
    one, two = (_col(raw[f"concurrent_{p}p"], "calls_per_s") for p in (1, 2))
    add(
        "W3",
        "scaling, 2 processes / 1",
        OURS,
        durability,
        "ratio",
        [b / a for a, b in zip(one, two, strict=True)],
    )

    for size, at in raw["state_load"].items():
        for key, measure, unit in W5:
            add("W5", measure.format(n=int(size)), OURS, durability, unit, [at[key]])
    sizes = list(raw["state_load"].values())
    flat = (("first_load_ms", "new process's first load"), ("snapshot_tail_ms", "snapshot + tail"))
    for key, what in (*flat, ("cache_tail_ms", "cache + tail")):
        ratio = [sizes[-1][key] / sizes[0][key]] if len(sizes) > 1 else []
        add(
            "W5",
            f"flatness, {what}: {sizes[-1]['events']:,} / {sizes[0]['events']:,} events",
            OURS,
            durability,
            "ratio",
            ratio,
        )
    for holding in ("tool", "model"):
        kills = [k for k in raw["kills"] if k["holding"] == holding]
        what = f"worker SIGKILLed holding a {holding} call"
        add("W5", f"run moves again, {what}", OURS, durability, "s", _col(kills, "resume_s"))
        add("W5", f"run completes, {what}", OURS, durability, "s", _col(kills, "complete_s"))
    for r in raw.get("parked", [])[:1]:
        n = r["parked"]
        idle = "idle Redis round trips/s of one worker process"
        reps = raw["parked"]
        add("R", f"{idle}, no run", OURS, durability, "trips/s", _col(reps, "idle_rt_per_s"))
        add("R", f"{idle}, {n:,} runs parked on an approval", OURS, durability, "trips/s",
            _col(reps, "parked_rt_per_s"))  # fmt: skip
        add("R", f"{idle}: {n:,} parked / none (target <= 2)", OURS, durability, "ratio",
            _col(reps, "ratio"))  # fmt: skip
    for key, measure, unit in RETENTION:
        add("T", measure.format(n=plan.retained_runs), OURS, durability, unit,
            _col(raw.get("retention", []), key))  # fmt: skip
    for mode, how in (("burst", "published at once"), ("paced", f"at {RATE:,.0f}/s offered")):
        reps = [r[mode] for r in raw.get("admission", [])]
        label = f"{plan.admission_runs:,} runs {how}, one intake process"
        for key, measure, unit in ADMISSION:
            add("A", f"{measure}, {label}", OURS, durability, unit, _col(reps, key))
    _vs_ours(out)
    return out


RETENTION = [  # R: one pass over {n} finished one-call runs (bench.retention)
    ("bytes_per_run_before", "Redis bytes per finished run, before retention", "bytes"),
    ("bytes_per_run_after", "Redis bytes per finished run, after a retention pass", "bytes"),
    ("after_over_before_pct", "Redis memory after {n:,} runs and a pass, over before them", "%"),
    ("archived_per_s", "runs archived per second (folder, fsync)", "runs/s"),
    ("archive_bytes_per_run", "archive bytes per run (compressed segment)", "bytes"),
]


FLOOR = [  # key, measure, system, durability ("": the run's)
    ("xadd_ms", "raw XADD round trip (100 B)", "redis", ""),
    ("xadd_ms", "raw XADD round trip (100 B)", "redis", "Redis AOF always"),
    ("stream_rtt_ms", "blocking stream hop (request/reply, 2 streams)", "redis", ""),
    ("append_ms", "store append, Lua, 1 event", OURS, ""),
    ("lock_pair_ms", "lock acquire + release (RedisLocks)", OURS, ""),
    ("dramatiq_hop_ms", "dramatiq hop, stock RedisBroker (polls)", "dramatiq", ""),
    ("streams_hop_ms", "dramatiq hop, our StreamsBroker", OURS, ""),
]
POOL_CPU = [  # a message's CPU includes the steps it carried on (handlers.carry)
    ("cpu_ms_model", "worker CPU, model pool's messages", "ms cpu"),
    ("cpu_ms_tools", "worker CPU, tools pool's messages", "ms cpu"),
    ("cpu_ms_accept", "worker CPU, accept pool's messages", "ms cpu"),
    ("cpu_ms_other", "worker CPU, other threads (broker, loops, tools)", "ms cpu"),
]
COSTS = [
    ("round_trips", "Redis round trips", "count"),
    ("messages", "messages delivered", "count"),
    ("commands", "Redis commands", "count"),
    ("cpu_ms", "worker CPU", "ms cpu"),
    *POOL_CPU,
    ("redis_cpu_ms", "redis-server CPU", "ms cpu"),
]
EMBEDDED = [
    ("ms_per_call", "ms per tool call, {cmd}, 1 run x {calls} calls", "ms/call"),
    ("growth", "growth ratio, {cmd}", "ratio"),
    ("start_s", "start-up to the run created, {cmd}", "s"),
    ("round_trips", "Redis round trips per tool call, {cmd}", "count"),
    ("cpu_ms", "CPU per tool call, {cmd}", "ms cpu"),
]
SNAPSHOTS = [  # S, beside W1: a write call's two workspace snapshots (bench.snapshots)
    ("per_write_wall_ms_median", "added per write call, 1,000 files / 10 MB, one-file write", "ms"),
    ("per_write_cpu_ms_median", "CPU added per write call, 1,000 files / 10 MB", "ms cpu"),
    ("per_write_wall_ms_p90", "added per write call, p90 of the rounds", "ms"),
    ("per_write_cpu_ms_p90", "CPU added per write call, p90 of the rounds", "ms cpu"),
    ("first_snapshot_ms", "first snapshot of the workspace (every file read)", "ms"),
]
W3 = [
    ("calls_per_s", "tool calls/s", "calls/s"),
    ("p50_turn_ms", "p50 turn latency", "ms"),
    ("p99_turn_ms", "p99 turn latency", "ms"),
    ("cpu_ms", "worker CPU per call", "ms cpu"),
    *((k, f"{m} per call", u) for k, m, u in POOL_CPU),
    ("round_trips", "Redis round trips per call", "count"),
    ("messages", "messages delivered per call", "count"),
    ("commands", "Redis commands per call", "count"),
]
ADMISSION = [
    ("runs_per_s", "runs created/s", "runs/s"),
    ("p50_ms", "publish→created p50", "ms"),
    ("p99_ms", "publish→created p99", "ms"),
    ("intake_cpu_ms_per_run", "intake CPU per run", "ms cpu"),
    ("round_trips_per_run", "intake Redis round trips per run", "count"),
]
_TAIL = f"{SNAP_BEHIND}-event tail"
W5 = [
    ("full_ms", "load, {n:,} events: read + fold the whole log", "ms"),
    ("first_load_ms", f"load, {{n:,}} events: snapshot + {_TAIL}, a new process's first", "ms"),
    (
        "first_load_spec_ms",
        "load, {n:,} events: of a new process's first, the spec's validation",
        "ms",
    ),
    (
        "first_load_claude_ms",
        f"load, {{n:,}} events: snapshot + {_TAIL}, a new process's first, a Claude spec",
        "ms",
    ),
    (
        "first_load_claude_spec_ms",
        "load, {n:,} events: of that first, the Claude spec's validation",
        "ms",
    ),
    ("snapshot_tail_ms", f"load, {{n:,}} events: snapshot + {_TAIL}, fresh cache", "ms"),
    ("cache_tail_ms", f"load, {{n:,}} events: process cache + {_TAIL}", "ms"),
    ("cache_check_ms", "load, {n:,} events: process cache, check only", "ms"),
    ("snapshot_kb", "snapshot size, {n:,} events", "KiB"),
]


def _vs_ours(out: list[Row]) -> None:
    ours = {(r["workload"], r["measure"]): r["median"] for r in out if r["system"] == OURS}
    for r in out:
        base = ours.get((r["workload"], r["measure"]))
        r["x_ours"] = r["median"] / base if base and r["workload"] in ("W1", "W2") else None


def _ran(reps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in reps if "skipped" not in r]


def _col(reps: list[dict[str, Any]], key: str) -> list[float]:
    return [float(r[key]) for r in reps]


def print_table(out: list[Row], meta: dict[str, Any]) -> None:
    print(
        f"\nagentledger bench: medians of {meta['reps']} repetitions; {meta['redis']}; "
        f"{meta['broker']}; {meta['worker_threads']} worker threads per process; "
        f"{meta['cpus']} CPUs; {meta['elapsed_s']} s"
    )
    for note in meta.get("notes", []):
        print(f"  note: {note}")
    w = max(len(r["measure"]) for r in out)
    s = max(len(r["system"]) for r in out)
    d = max(len(r["durability"]) for r in out)
    head = f"{'':3} {'measure':<{w}}  {'system':<{s}}  {'durability':<{d}}"
    print(f"\n{head} {'median':>9} {'unit':<8} {'x hop':>7} {'x ours':>6}  values")
    last = None
    for r in out:
        if r["workload"] != last:
            print()
            last = r["workload"]
        ratio = _num(r["x_stream_hop"]) if r["x_stream_hop"] is not None else ""
        mine = f"{r['x_ours']:.2f}" if r.get("x_ours") is not None else ""
        values = " ".join(_num(v) for v in r["values"])
        print(
            f"{r['workload']:<3} {r['measure']:<{w}}  {r['system']:<{s}}  {r['durability']:<{d}} "
            f"{_num(r['median']):>9} {r['unit']:<8} {ratio:>7} {mine:>6}  {values}"
        )


def _num(value: float) -> str:
    if value < 1:
        return f"{value:.3f}"
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"
