"""The idempotency ledger in memory, for unit tests; it passes the same contract
suite as the Redis one (keep times counted on the clock it is given)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agentledger.services.adapters.ledger.port import Verdict
from agentledger.services.clock import Clock


@dataclass
class _Entry:
    state: str
    request: str
    owner: str
    started: float
    result: Any = None
    expires_at: float | None = None


class MemoryLedger:
    def __init__(self, clock: Clock, *, keep_s: float = 30 * 86400):
        self._clock = clock
        self._keep_s = keep_s
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def begin(self, op_key: str, request: str, owner: str, *, now: float) -> Verdict:
        with self._lock:
            e = self._live(op_key)
            if e is None:
                self._entries[op_key] = _Entry("pending", request, owner, now)
                return Verdict("run")
            if e.request != request:
                return Verdict("conflict", e.owner)
            if e.state == "done":
                return Verdict("replay", e.owner, e.result)
            return Verdict("in_progress", e.owner, since=e.started)

    def finish(self, op_key: str, request: str, owner: str, result: Any, *, now: float) -> None:
        with self._lock:
            e = self._live(op_key)
            if e is not None and e.request != request:
                return
            expires = self._clock.now() + self._keep_s if self._keep_s > 0 else None
            started = e.started if e else now
            self._entries[op_key] = _Entry("done", request, owner, started, result, expires)

    def abandon(self, op_key: str) -> None:
        with self._lock:
            e = self._live(op_key)
            if e is not None and e.state == "pending":
                del self._entries[op_key]

    def _live(self, op_key: str) -> _Entry | None:
        e = self._entries.get(op_key)
        if e is not None and e.expires_at is not None and self._clock.now() >= e.expires_at:
            del self._entries[op_key]
            return None
        return e
