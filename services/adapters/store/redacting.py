"""An event store that redacts secrets before anything is appended: what the
run's redactor for its log (`agentledger.services.secrets.stored_redactor`: every secret,
or for a spec that keeps its own in the log, the process's only) finds. It
wraps the real store in the composition root, so every writer — the model,
tool and acceptance pools, the intake — goes through it, and what a tool
returned never reaches Redis with a secret in it.

Each event is serialised once: packed by the codec, its bytes scanned for what
the redactor finds (`Redactor.finds_packed`), and those bytes written by the
append (`agentledger.services.adapters.store.packed`); only an event the scan
says yes to is walked, redacted and packed again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agentledger.events.redact import Redactor, redact_envelope
from agentledger.events.types import CODEC, RunCreated
from agentledger.schemas.codec import payload_at
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.store import packed
from agentledger.services.adapters.store.port import (
    Append,
    EventStore,
    Outgoing,
    RunIndexEntry,
    Snapshot,
)
from agentledger.services.bounded_cache import BoundedCache

MAX_SPECS = 4096  # runs whose spec is remembered; older ones are read again
MAX_SPEC_BYTES = 16 << 20  # and their specs' JSON at most (a scripted spec can be megabytes)
# a thread asks for the redactor of the run it writes again after this long (the run's
# secrets read again from the environment, the process's looked at): a step asks ~4 times
REDACTOR_S = 1.0
MAX_SEEN_RUNS = 1024  # runs whose stored events a thread holds until its next append
Seen = dict[int, tuple[Envelope[Any], bytes | None]]  # id -> (event as stored, its bytes)


class RedactingStore:
    def __init__(self, inner: EventStore, redactor_for: Callable[[RunSpec], Redactor]):
        self._inner = inner
        self._redactor_for = redactor_for
        self._specs: BoundedCache[RunSpec] = BoundedCache(
            max_items=MAX_SPECS, max_bytes=MAX_SPEC_BYTES
        )
        # per thread, the events as_stored returned since the last append, by run (by id,
        # held: an id is not reused while its object is held), which need no redacting again
        self._stored = threading.local()
        self._redactors = threading.local()  # (run id, redactor, when it was asked for)

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
        stored = self._unredacted(run_id, events)
        held = self._held(run_id)
        self._stored.events = {}
        with packed.given(held):
            return self._inner.append(
                run_id, stored, expected_seq=expected_seq, live=live, messages=messages,
                expected_id=expected_id, snapshot=snapshot,
            )  # fmt: skip

    def append_many(self, appends: Sequence[Append]) -> list[int | Exception]:
        stored = [replace(a, events=self._unredacted(a.run_id, a.events)) for a in appends]
        held: dict[int, tuple[Envelope[Any], bytes]] = {}
        for a in appends:
            held.update(self._held(a.run_id))
        self._stored.events = {}
        with packed.given(held):
            return self._inner.append_many(stored)

    def _unredacted(self, run_id: str, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        """The events redacted, unless they are what `as_stored` returned for the run."""
        seen = self._seen().get(run_id, {})
        done = all((found := seen.get(id(e))) is not None and found[0] is e for e in events)
        return list(events) if done else self.as_stored(run_id, events)

    def _held(self, run_id: str) -> dict[int, tuple[Envelope[Any], bytes]]:
        """The bytes `as_stored` packed of the run's events, for the append to write."""
        seen = self._seen().get(run_id, {})
        return {k: (e, raw) for k, (e, raw) in seen.items() if raw is not None}

    def as_stored(self, run_id: str, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        """The events with their secrets redacted, then as the store writes them (a
        field past its cap cut, after redaction: a secret is never split between an
        event and its overflow pages): what the log will hold (doing it again changes
        nothing and returns the same objects)."""
        r = self._redactor(run_id, events)
        clean = [_redacted(env, r) for env in events]
        raws = {id(env): raw for env, raw in clean}
        stored = self._inner.as_stored(run_id, [env for env, _ in clean])
        runs = self._seen()
        if run_id not in runs and len(runs) >= MAX_SEEN_RUNS:
            runs.clear()  # as_stored of many runs, none appended: forget the oldest batch
        seen = runs.setdefault(run_id, {})
        for e in stored:  # not redacted again; its bytes written as they are (a cut one's not)
            seen[id(e)] = (e, raws.get(id(e)))
        self._stored.events = runs
        return stored

    def _redactor(self, run_id: str, events: Sequence[Envelope[Any]]) -> Redactor | None:
        """The run's redactor (None: no run to redact for), kept by the asking thread
        and asked for again once REDACTOR_S passed, or for another run."""
        now = time.monotonic()
        last = getattr(self._redactors, "last", None)
        if last is not None and last[0] == run_id and now - last[2] < REDACTOR_S:
            kept: Redactor = last[1]
            return kept
        spec = self._spec(run_id, events)
        if spec is None:
            return None
        r = self._redactor_for(spec)
        self._redactors.last = (run_id, r, now)
        return r

    def _seen(self) -> dict[str, Seen]:
        found: dict[str, Seen] = getattr(self._stored, "events", {})
        return found

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]:
        return self._inner.read(run_id, after_seq=after_seq)

    def runs(self, *, limit: int = 50) -> list[RunIndexEntry]:
        return self._inner.runs(limit=limit)

    def idle_live_runs(
        self, *, idle_since: float, shards: Sequence[int] | None = None, limit: int = 100
    ) -> list[str]:
        return self._inner.idle_live_runs(idle_since=idle_since, shards=shards, limit=limit)

    def touch(self, run_id: str, *, at: float, seq: int | None = None) -> None:
        self._inner.touch(run_id, at=at, seq=seq)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # whatever else the real store offers

    def _spec(self, run_id: str, events: Sequence[Envelope[Any]]) -> RunSpec | None:
        spec = self._specs.get(run_id)
        if spec is None:
            first = [e for e in events if isinstance(e.data, RunCreated)][:1]
            first = first or self._inner.read(run_id)[:1]
            if not first or not isinstance(first[0].data, RunCreated):
                return None
            spec = first[0].data.spec
            self._specs.put(run_id, spec, len(spec.model_dump_json()))
        return spec


def _redacted(env: Envelope[Any], r: Redactor | None) -> tuple[Envelope[Any], bytes | None]:
    """The event with its secrets redacted, and its bytes as the codec packs it (None
    when it cannot be packed: the append says why). Packed once and scanned as
    packed; walked and packed again only when the scan finds something."""
    try:
        raw = CODEC.encode(env)
    except InvalidEvent:
        return (env if r is None else redact_envelope(env, r)), None
    if r is None or isinstance(env.data, RunCreated):
        return env, raw
    if not r.finds_packed(raw[payload_at(raw) :]):  # the payload: the header is not redacted
        return env, raw
    clean = redact_envelope(env, r)
    return (env, raw) if clean is env else (clean, CODEC.encode(clean))
