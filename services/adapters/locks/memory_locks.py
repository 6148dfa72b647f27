"""The lock table in memory, for unit tests: the pure partitioned rule of
`agentledger.events.lock_partitions` (with one partition, `agentledger.events.locks`) behind one lock,
with the same port as the Redis script (it passes the same contract suite).
Times come from the clock it is given, as Redis's come from `TIME`."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from agentledger.events.lock_partitions import (
    Partitioned,
    close_all,
    enqueue_all,
    expire_all,
    look_all,
    release_many,
    renew_final,
    waiting_on,
)
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Grant, Request
from agentledger.services.adapters.locks.port import Granted, Holder, KeyLook, LockReply
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.clock import Clock


class MemoryLocks:
    def __init__(self, clock: Clock, *, lease_s: float, partitions: int = 1):
        self._clock = clock
        self.lease_s = lease_s
        self.partitions = partitions
        self._table = Partitioned.empty(partitions)
        self._who: dict[str, tuple[Holder, Outgoing | None]] = {}
        self._lock = threading.Lock()

    def enqueue(self, asks: Sequence[LockAsk], notify: Sequence[Outgoing | None]) -> LockReply:
        with self._lock:
            for a, n in zip(asks, notify, strict=True):
                self._who.setdefault(a.request_id, (Holder(a.request_id, a.run_id, a.call_id), n))
            requests = [
                Request(
                    a.request_id,
                    a.keys,
                    self.lease_s,
                    limits=a.limits,
                    run=a.run_id,
                    tenant=a.tenant,
                )  # fmt: skip
                for a in asks
            ]
            self._table, grants = enqueue_all(self._table, requests, now=self._clock.now())
            return LockReply([self._granted(g) for g in grants])

    def release(self, asks: Sequence[LockAsk]) -> LockReply:
        with self._lock:
            named = {a.request_id: list(a.keys) for a in asks}
            self._table, grants = release_many(self._table, named, now=self._clock.now())
            out = [self._granted(g) for g in grants]
            for rid in named:
                self._who.pop(rid, None)
            return LockReply(out)

    def renew(self, ask: LockAsk) -> bool:
        with self._lock:
            self._table, renewed = renew_final(
                self._table, ask.request_id, ask.keys, now=self._clock.now()
            )
            return renewed

    def expire(self) -> LockReply:
        with self._lock:
            self._table, gone, grants = expire_all(self._table, now=self._clock.now())
            granted = [self._granted(g) for g in grants]
            expired = [self._who.pop(r.id)[0] for r in gone if r.id in self._who]
            return LockReply(granted, expired)

    def close(self, keys: Mapping[str, float]) -> LockReply:
        with self._lock:
            self._table = close_all(self._table, keys, now=self._clock.now())
            told = [self._who.get(r, (None, None))[1] for r in waiting_on(self._table, keys)]
            return LockReply(told=[n for n in dict.fromkeys(told) if n is not None])

    def look(self, keys: Sequence[str]) -> dict[str, KeyLook]:
        with self._lock:
            seen = look_all(self._table, keys, now=self._clock.now())
            return {k: KeyLook(n, until or None) for k, (n, until) in seen.items()}

    def _granted(self, g: Grant) -> Granted:
        holder, notify = self._who.get(g.id, (Holder(g.id, "", ""), None))
        return Granted(Grant(g.id, dict(g.tokens), g.lease_until, g.final), holder, notify)
