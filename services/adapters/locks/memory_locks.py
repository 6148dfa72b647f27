"""The lock table in memory, for unit tests: the pure rule of `events.locks` behind
one lock, with the same port as the Redis script (it passes the same contract
suite). Times come from the clock it is given, as Redis's come from `TIME`."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from events.lock_step import LockAsk
from events.locks import Grant, LockTable, Request, enqueue, expire, release, renew
from services.adapters.locks.port import Granted, Holder, LockReply
from services.adapters.store.port import Outgoing
from services.clock import Clock


class MemoryLocks:
    def __init__(self, clock: Clock, *, lease_s: float):
        self._clock = clock
        self.lease_s = lease_s
        self._table = LockTable()
        self._who: dict[str, tuple[Holder, Outgoing | None]] = {}
        self._lock = threading.Lock()

    def enqueue(self, asks: Sequence[LockAsk], notify: Sequence[Outgoing | None]) -> LockReply:
        with self._lock:
            held = set(self._table.leases)
            for a, n in zip(asks, notify, strict=True):
                self._who.setdefault(a.request_id, (Holder(a.request_id, a.run_id, a.call_id), n))
            requests = [Request(a.request_id, a.keys, self.lease_s) for a in asks]
            self._table, grants = enqueue(self._table, requests, now=self._clock.now())
            again = [a.request_id for a in asks if a.request_id in held]
            out = [self._granted(g.id, g.tokens, g.lease_until) for g in grants]
            for rid in dict.fromkeys(again):
                out.append(
                    self._granted(rid, self._tokens_of(rid), self._table.leases[rid])
                )
            return LockReply(out)

    def release(self, request_ids: Sequence[str]) -> LockReply:
        with self._lock:
            grants = []
            for rid in request_ids:
                self._table, more = release(self._table, rid, now=self._clock.now())
                grants += more
                self._who.pop(rid, None)
            return LockReply([self._granted(g.id, g.tokens, g.lease_until) for g in grants])

    def renew(self, request_id: str) -> bool:
        with self._lock:
            self._table, renewed = renew(self._table, request_id, now=self._clock.now())
            return renewed

    def expire(self) -> LockReply:
        with self._lock:
            self._table, gone, grants = expire(self._table, now=self._clock.now())
            expired = [self._who.pop(rid)[0] for rid in gone if rid in self._who]
            granted = [self._granted(g.id, g.tokens, g.lease_until) for g in grants]
            return LockReply(granted, expired)

    def _tokens_of(self, request_id: str) -> dict[str, int]:
        keys = self._table.requests[request_id].keys
        return {k: self._table.tokens[k] for k in keys}

    def _granted(self, rid: str, tokens: Mapping[str, int], lease_until: float) -> Granted:
        holder, notify = self._who.get(rid, (Holder(rid, "", ""), None))
        return Granted(Grant(rid, dict(tokens), lease_until), holder, notify)
