"""The metrics a worker process records, and how it derives them from what it
already holds: a step's states before and after and the events it appended
(`observe_step`, called by the run repository after each append), a step's
wall time (a dramatiq middleware), an inbox rejection. Nothing here talks to
Redis: what is read from Redis (runs by status, queue lag, dead letters) is
read when scraped (`scrape`).

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
from prometheus_client import CollectorRegistry, Counter, Histogram

from agentledger.events.batch import Appended
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

log = logging.getLogger(__name__)
NS = "agentledger"
FLUSH_S = 0.5  # how stale a scrape may be: the tallies reach prometheus_client this often
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
TOOL_OUTCOMES: dict[type[Any], str] = {
    ToolCallSucceeded: "succeeded",
    ToolCallFailed: "failed",
    ToolCallRejected: "rejected",
    ToolCallOutcomeUnknown: "outcome_unknown",
    ToolCallCancelled: "cancelled",
    ToolCallForceTerminated: "force_terminated",
}
TOKEN_KINDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_input_tokens"),
    ("cache_write", "cache_creation_input_tokens"),
)


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
        self.step_seconds = Histogram(
            "step_seconds", "wall time of one worker step", ["pool", "actor", "outcome"],
            namespace=NS, registry=r, buckets=STEP_BUCKETS,
        )  # fmt: skip
        # the hot path only adds to these; `flush` (a thread, every FLUSH_S) hands them on
        self._counts: dict[tuple[Any, ...], float] = {}
        self._observed: list[tuple[tuple[str, str, str], float]] = []
        self._lock = threading.Lock()
        self._children: dict[tuple[Any, ...], Any] = {}  # labels() is slow: keep the children
        self._stop = threading.Event()

    def count(self, metric: Any, labels: tuple[str, ...], n: float = 1.0) -> None:
        key = (metric, labels)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0.0) + n

    def rejected_inc(self) -> None:
        self.count(self.rejected, ())

    def time_step(self, labels: tuple[str, str, str], seconds: float) -> None:
        with self._lock:
            self._observed.append((labels, seconds))

    def flush(self) -> None:
        """Hand what was tallied to prometheus_client (its values, or its files)."""
        with self._lock:
            counts, self._counts = self._counts, {}
            observed, self._observed = self._observed, []
        for (metric, labels), n in counts.items():
            self._child(metric, labels).inc(n)
        for labels, seconds in observed:
            self._child(self.step_seconds, labels).observe(seconds)

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

    def _count_events(self, appended: Appended) -> str:
        """Count the batch's events, tokens, tool outcomes and lock waits; the model
        that replied in it ('' when none did)."""
        count, before, after = self.count, appended.before, appended.after
        model = ""
        for env in appended.batch:
            data = env.data
            count(self.events, (env.type,))
            if isinstance(data, ModelResponded):
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
    for state in (after, before):
        if state is not None and (call := state.call(call_id)) is not None:
            return call.name
    for turn in reversed(after.turns):
        if (call := turn.call(call_id)) is not None:
            return call.name
    return "unknown"


class StepTimer(Middleware):
    """The wall time of each message a worker thread processes, by pool and actor
    (the pool from the broker's routes). The start sits on the message's options
    and is taken off before any retry could store it."""

    def __init__(self, instruments: Instruments) -> None:
        self.instruments = instruments

    def before_process_message(self, broker: Any, message: Any) -> None:
        message.options["_al_t0"] = time.perf_counter()

    def after_process_message(
        self, broker: Any, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        t0 = message.options.pop("_al_t0", None)
        if t0 is None:
            return
        route = getattr(broker, "routes", {}).get(message.queue_name)
        pool = route.pool if route is not None else "unknown"
        outcome = "ok" if exception is None else "error"
        self.instruments.time_step((pool, message.actor_name, outcome), time.perf_counter() - t0)

    after_skip_message = after_process_message
