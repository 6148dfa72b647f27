"""An event store that redacts secrets before anything is appended, for runs
whose spec does not keep them in the log (`keep_secrets_in_log: false`, the
default). It wraps the real store in the composition root, so every writer —
the model, tool and acceptance pools, the intake — goes through it, and what
a tool returned never reaches Redis with a secret in it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from events.redact import Redactor, redact_envelope
from events.types import RunCreated
from schemas.envelope import Envelope
from schemas.spec import RunSpec
from services.adapters.store.port import EventStore, Outgoing, RunIndexEntry, Snapshot

MAX_SPECS = 4096  # runs whose spec is remembered; older ones are read again


class RedactingStore:
    def __init__(self, inner: EventStore, redactor_for: Callable[[RunSpec], Redactor]):
        self._inner = inner
        self._redactor_for = redactor_for
        self._specs: dict[str, RunSpec] = {}
        self._last = threading.local()  # the batch as_stored last returned, per thread

    def append(
        self,
        run_id: str,
        events: Sequence[Envelope[Any]],
        *,
        expected_seq: int,
        live: bool,
        messages: Sequence[Outgoing] = (),
        expected_id: str = "",
        snapshot: Snapshot | None = None,
    ) -> int:
        last_run, last = getattr(self._last, "batch", ("", ()))
        same = last_run == run_id and len(last) == len(events)
        same = same and all(a is b for a, b in zip(last, events, strict=True))
        stored = list(events) if same else self.as_stored(run_id, events)
        self._last.batch = ("", ())
        return self._inner.append(
            run_id, stored, expected_seq=expected_seq, live=live, messages=messages,
            expected_id=expected_id, snapshot=snapshot,
        )  # fmt: skip

    def as_stored(self, run_id: str, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        """The events with their secrets redacted: what the log will hold (redacting
        them again changes nothing and returns the same objects)."""
        spec = self._spec(run_id, events)
        if spec is None or spec.keep_secrets_in_log:
            stored = list(events)
        else:
            r = self._redactor_for(spec)
            stored = [redact_envelope(env, r) for env in events]
        self._last.batch = (run_id, tuple(stored))  # appending exactly these redacts nothing again
        return stored

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        return self._inner.read(run_id, after_seq=after_seq)

    def runs(self, *, limit: int = 50) -> list[RunIndexEntry]:
        return self._inner.runs(limit=limit)

    def idle_live_runs(
        self, *, idle_since: float, shards: Sequence[int] | None = None, limit: int = 100
    ) -> list[str]:
        return self._inner.idle_live_runs(idle_since=idle_since, shards=shards, limit=limit)

    def touch(self, run_id: str, *, at: float) -> None:
        self._inner.touch(run_id, at=at)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # whatever else the real store offers

    def _spec(self, run_id: str, events: Sequence[Envelope[Any]]) -> RunSpec | None:
        spec = self._specs.get(run_id)
        if spec is None:
            first = [e for e in events if isinstance(e.data, RunCreated)][:1]
            first = first or self._inner.read(run_id)[:1]
            if not first or not isinstance(first[0].data, RunCreated):
                return None
            if len(self._specs) >= MAX_SPECS:
                self._specs.pop(next(iter(self._specs)))
            spec = self._specs[run_id] = first[0].data.spec
        return spec
