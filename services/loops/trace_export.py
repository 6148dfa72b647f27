"""Live traces: follows the shard feeds in a consumer group of its own and, for
each append, sends the spans those events ended (`agentledger.events.spans.SpanBuilder`
over the run's log, so a live run is exported exactly as `agentledger trace`
prints a past one). The group shares the feeds among every process that
exports, so each span is sent once (again only after a crash before the ack).
A run's builder is kept while it is live, bounded; one that was dropped is
rebuilt from the log, sending only what the entry in hand ended. Telemetry is
best effort: a span the collector refused is logged, never retried forever."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

import redis

from agentledger.events.errors import CoreError
from agentledger.events.spans import Span, SpanBuilder
from agentledger.events.state import RunState
from agentledger.services.adapters.store.port import EventStore
from agentledger.services.adapters.tracing.otel import Tracing
from agentledger.services.keys import Keys
from agentledger.services.secrets import redactor_for

log = logging.getLogger(__name__)
GROUP = "traces"
READ_COUNT = 200
KEEP_RUNS = 1000
IDLE_WAIT_S = (0.05, 1.0)  # the wait between rounds: shortest when busy, longest when idle


class TraceExport:
    def __init__(
        self, client: redis.Redis, keys: Keys, store: EventStore, tracing: Tracing, *,
        shards: range, consumer: str,
    ) -> None:  # fmt: skip
        self._r, self._keys, self._store, self._tracing = client, keys, store, tracing
        self._feeds = [keys.feed(s) for s in shards]
        self._consumer = consumer
        self._builders: OrderedDict[str, SpanBuilder] = OrderedDict()
        for feed in self._feeds:
            _ensure_group(client, feed)

    def run(self, stop: threading.Event) -> None:
        wait = IDLE_WAIT_S[0]
        while not stop.wait(wait):
            sent = self.once()
            wait = IDLE_WAIT_S[0] if sent else min(wait * 2, IDLE_WAIT_S[1])

    def once(self) -> int:
        """One round over the feeds (one read each: a cluster refuses a read
        across slots); the number of feed entries handled."""
        handled = 0
        for feed in self._feeds:
            reply: Any = self._r.xreadgroup(GROUP, self._consumer, {feed: ">"}, count=READ_COUNT)
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    self._handle(fields)
                    self._r.xack(feed, GROUP, entry_id)
                    handled += 1
        return handled

    def _handle(self, fields: dict[bytes, bytes]) -> None:
        run_id = fields[b"run"].decode()
        last = int(fields[b"seq"])
        first = int(fields.get(b"first", last))
        try:
            ended = self._ended(run_id, first, last)  # (the run's state, the spans ended)
        except CoreError as exc:  # a broken log: `agentledger replay` says where
            log.warning("no spans for run %s: %s", run_id, exc)
            self._builders.pop(run_id, None)
            return
        state = ended[0] if ended else None
        if state is not None and ended[1]:
            self._tracing.send(ended[1], redactor_for(state.spec))

    def _ended(self, run_id: str, first: int, last: int) -> tuple[RunState | None, list[Span]]:
        builder = self._builders.pop(run_id, None)
        if builder is None or builder.seq >= first:
            builder = SpanBuilder()  # rebuilt from the log; only this entry's spans are sent
        ended: list[Span] = []
        for env in self._store.read(run_id, after_seq=builder.seq):
            if env.seq > last:
                break
            spans = builder.add(env)
            if env.seq >= first:
                ended += spans
        if builder.state is not None and not builder.state.status.terminal:
            self._builders[run_id] = builder
            while len(self._builders) > KEEP_RUNS:
                self._builders.popitem(last=False)
        return builder.state, ended


def _ensure_group(client: redis.Redis, feed: str) -> None:
    try:  # from now on: what happened before the first exporter is `agentledger trace`'s
        client.xgroup_create(feed, GROUP, id="$", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
