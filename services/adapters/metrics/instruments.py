"""The metrics a worker process records, and how it derives them from what it
already holds: a step's states before and after and the events it appended
(`observe_step`, called by the run repository after each append: counts, and
the durations the events' times give, `timings`), a step's wall time, its wait
in the queue (publish → claim) and the busy threads of its pool (a dramatiq
middleware), an inbox rejection. Nothing here talks to Redis: what is read from
Redis (runs by status, queue lag, dead letters) is read when scraped (`scrape`).

prometheus_client picks its storage when it is imported: with
`PROMETHEUS_MULTIPROC_DIR` set (the parent of `workers --processes N` sets it
for its children) every value lives in a file of that folder and the parent
serves them all; otherwise in this process."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from dramatiq.middleware import Middleware
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from agentledger.events.batch import Appended
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.state import RunState
from agentledger.events.types import (
    ModelResponded,
    ToolCallCancelled,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallOutcomeUnknown,
    ToolCallRejected,
    ToolCallSucceeded,
    ToolCallWaiting,
)
from agentledger.services.adapters.metrics.timings import TOKEN_KINDS, Timings, find_call

log = logging.getLogger(__name__)
NS = "agentledger"
FLUSH_S = 0.5  # how stale a scrape may be: the tallies reach prometheus_client this often
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
TOKEN_BUCKETS = (0, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
RUN_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600)
TOOL_OUTCOMES: dict[type[Any], str] = {
    ToolCallSucceeded: "succeeded",
    ToolCallFailed: "failed",
    ToolCallRejected: "rejected",
    ToolCallOutcomeUnknown: "outcome_unknown",
    ToolCallCancelled: "cancelled",
    ToolCallForceTerminated: "force_terminated",
}


class Instruments:
    """The counters and histograms of one process, in a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.transitions = Counter(
            "run_transitions",
            "run status changes",
            ["from_status", "to_status"],
            namespace=NS,
            registry=r,
        )
        self.terminal = Counter(
            "runs_ended", "runs that reached a terminal state", ["status"], namespace=NS, registry=r
        )
        self.events = Counter(
            "events_appended", "events appended, by type", ["type"], namespace=NS, registry=r
        )
        self.tokens = Counter(
            "model_tokens", "model tokens", ["model", "kind"], namespace=NS, registry=r
        )
        self.cost = Counter(
            "model_cost_usd", "model cost in US dollars", ["model"], namespace=NS, registry=r
        )
        self.tool_calls = Counter(
            "tool_calls", "tool call outcomes", ["tool", "outcome"], namespace=NS, registry=r
        )
        self.lock_waits = Counter(
            "lock_waits", "tool calls that queued for a lock", ["tool"], namespace=NS, registry=r
        )
        self.carried = Counter(
            "steps_carried", "steps a worker took in the append of the step before, with no "
            "message (by the pool whose step it was)", ["pool"], namespace=NS, registry=r,
        )  # fmt: skip
        self.rejected = Counter(
            "inbox_rejected", "inbox entries the intake rejected", namespace=NS, registry=r
        )
        self.tenant_cost = Counter(
            "tenant_cost_usd", "model cost in US dollars, by the run's tenant", ["tenant"],
            namespace=NS, registry=r,
        )  # fmt: skip
        self._histograms(r)
        self._gauges(r)
        # the hot path only adds to these; `flush` (a thread, every FLUSH_S) hands them on
        self._counts: dict[tuple[Any, ...], float] = {}
        self._observed: list[tuple[Any, tuple[str, ...], float]] = []
        self._busy: dict[str, int] = {}  # threads in a message now, by pool
        self._timings = Timings()
        self._lock = threading.Lock()
        self._children: dict[tuple[Any, ...], Any] = {}  # labels() is slow: keep the children
        self._stop = threading.Event()

    def _histograms(self, r: CollectorRegistry) -> None:
        def histogram(name: str, doc: str, labels: list[str], buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, labels, namespace=NS, registry=r, buckets=buckets)

        self.step_seconds = histogram("step_seconds", "wall time of one worker step",
                                      ["pool", "actor", "outcome"], STEP_BUCKETS)  # fmt: skip
        self.tool_call_seconds = histogram(
            "tool_call_seconds", "a tool call's run: its claim to its outcome",
            ["tool", "outcome"], STEP_BUCKETS,
        )  # fmt: skip
        self.model_call_seconds = histogram(
            "model_call_seconds", "a model call: its claim to its reply (outcome ok) or failure",
            ["model", "outcome"], MODEL_BUCKETS,
        )  # fmt: skip
        self.model_call_tokens = histogram(
            "model_call_tokens", "the tokens of one model reply, by kind", ["model", "kind"],
            TOKEN_BUCKETS,
        )  # fmt: skip
        self.lock_wait_seconds = histogram(
            "lock_wait_seconds", "a tool call's wait for its locks (0: granted at once)",
            ["tool"], STEP_BUCKETS,
        )  # fmt: skip
        self.queue_wait_seconds = histogram(
            "queue_wait_seconds", "a message's wait in its queue: published (or due) to taken",
            ["pool"], STEP_BUCKETS,
        )  # fmt: skip
        self.run_seconds = histogram(
            "run_seconds", "a run's life: created to its terminal state", ["status"], RUN_BUCKETS
        )

    def _gauges(self, r: CollectorRegistry) -> None:
        # livesum: with --processes N the parent adds up its live children's values
        self.threads_busy = Gauge(
            "pool_threads_busy", "the pool's threads processing a message now", ["pool"],
            namespace=NS, registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.threads = Gauge(
            "pool_threads", "the pool's threads (its thread budget)", ["pool"],
            namespace=NS, registry=r, multiprocess_mode="livesum",
        )  # fmt: skip

    def pool_threads(self, budgets: dict[str, int]) -> None:
        """Each served pool's thread budget (the busy gauge's ceiling)."""
        for pool, n in budgets.items():
            self.threads.labels(pool).set(n)
            with self._lock:
                self._busy.setdefault(pool, 0)

    def busy(self, pool: str, n: int) -> None:
        with self._lock:
            self._busy[pool] = self._busy.get(pool, 0) + n

    def count(self, metric: Any, labels: tuple[str, ...], n: float = 1.0) -> None:
        key = (metric, labels)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0.0) + n

    def rejected_inc(self) -> None:
        self.count(self.rejected, ())

    def time_step(self, labels: tuple[str, str, str], seconds: float) -> None:
        self.observe(self.step_seconds, labels, seconds)

    def observe(self, histogram: Any, labels: tuple[str, ...], value: float) -> None:
        with self._lock:
            self._observed.append((histogram, labels, value))

    def flush(self) -> None:
        """Hand what was tallied to prometheus_client (its values, or its files)."""
        with self._lock:
            counts, self._counts = self._counts, {}
            observed, self._observed = self._observed, []
            busy = dict(self._busy)
        for (metric, labels), n in counts.items():
            self._child(metric, labels).inc(n)
        for histogram, labels, value in observed:
            self._child(histogram, labels).observe(value)
        for pool, n in busy.items():
            self._child(self.threads_busy, (pool,)).set(n)

    def start(self) -> Instruments:
        threading.Thread(
            target=self._flush_forever, name="agentledger-metrics-flush", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.flush()

    def _flush_forever(self) -> None:
        while not self._stop.wait(FLUSH_S):
            try:
                self.flush()
            except Exception:  # a metric is never worth the thread
                log.exception("metrics: could not flush")

    def _child(self, metric: Any, labels: tuple[str, ...]) -> Any:
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels) if labels else metric
        return child

    def observe_step(self, appended: Appended) -> None:
        """Count what one append did; never lets a metrics fault fail the step."""
        try:
            self._observe(appended)
        except Exception:  # a metric is never worth a step
            log.exception("metrics: could not count a step of run %r", appended.after.run_id)

    def _observe(self, appended: Appended) -> None:
        count = self.count
        before, after = appended.before, appended.after
        for was, status in appended.moves():  # every status passed through, in order
            count(self.transitions, (str(was or "none"), str(status)))
            if status.terminal and not (was and was.terminal):
                count(self.terminal, (str(status),))
        if appended.carried is not None:  # a step carried on (handlers.carry)
            count(self.carried, (appended.carried,))
        model = self._count_events(appended)
        spent = after.cost_usd - (before.cost_usd if before else 0.0)
        if spent > 0:
            count(self.cost, (model or "unknown",), spent)
            count(self.tenant_cost, (after.spec.principal.tenant or "",), spent)
        for name, labels, value in self._timings.of(appended, TOOL_OUTCOMES):
            self.observe(getattr(self, name), labels, value)

    def _count_events(self, appended: Appended) -> str:
        """Count the batch's events, tokens, tool outcomes and lock waits; the model
        that replied in it ('' when none did)."""
        count, before, after = self.count, appended.before, appended.after
        model = ""
        for env in appended.batch:
            data = env.data
            count(self.events, (env.type,))
            if isinstance(data, ModelResponded | ToolSampledModel):  # a server's sampling too
                model = data.model
                for kind, field_name in TOKEN_KINDS:
                    if n := getattr(data.usage, field_name):
                        count(self.tokens, (model, kind), n)
            elif (outcome := TOOL_OUTCOMES.get(type(data))) is not None:
                count(self.tool_calls, (_tool(before, after, data.call_id), outcome))
            elif isinstance(data, ToolCallWaiting):
                count(self.lock_waits, (_tool(before, after, data.call_id),))
        return model

    def step_timer(self) -> Middleware:
        return StepTimer(self)


def _tool(before: RunState | None, after: RunState, call_id: str) -> str:
    call = find_call(after, call_id) or find_call(before, call_id)
    return call.name if call is not None else "unknown"


class StepTimer(Middleware):
    """The wall time of each message a worker thread processes, by pool and actor
    (the pool from the broker's routes), its wait in the queue before (from its
    publication, or from when it was due if it was delayed: the publisher's wall
    clock against ours), and the pool's busy threads meanwhile. The start sits on
    the message's options and is taken off before any retry could store it."""

    def __init__(self, instruments: Instruments) -> None:
        self.instruments = instruments

    def before_process_message(self, broker: Any, message: Any) -> None:
        message.options["_al_t0"] = time.perf_counter()
        pool = _pool(broker, message)
        self.instruments.busy(pool, +1)
        published_ms = max(message.message_timestamp or 0, message.options.get("eta") or 0)
        if published_ms:
            waited = max(0.0, time.time() - published_ms / 1000)
            self.instruments.observe(self.instruments.queue_wait_seconds, (pool,), waited)

    def after_process_message(
        self, broker: Any, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        t0 = message.options.pop("_al_t0", None)
        if t0 is None:
            return
        pool = _pool(broker, message)
        self.instruments.busy(pool, -1)
        outcome = "ok" if exception is None else "error"
        self.instruments.time_step((pool, message.actor_name, outcome), time.perf_counter() - t0)

    after_skip_message = after_process_message


def _pool(broker: Any, message: Any) -> str:
    route = getattr(broker, "routes", {}).get(message.queue_name)
    return str(route.pool) if route is not None else "unknown"
