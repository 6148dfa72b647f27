"""The lock table in N partitions, pure: a resource lives in the partition
crc32(name) mod N, each partition is a `LockTable` of `agentledger.events.locks` (on Redis,
one hash tag: one slot, one script call), and a request whose resources span
partitions is acquired part by part in ascending partition order.

A part that is not the request's last is granted as a partial hold (held, no
lease); its grant sends the next part on, carrying the tokens so far, so the
last part's grant holds every token: a call runs only holding all its locks
(all or nothing). Only such final grants are reported to callers. Every part
carries the request's slot limits (`Request.limits`), each partition reading
those of its own keys.

No deadlock. A request waits in at most one partition p and holds only parts in
partitions below p. In p it waits for holders of p, which are either final
(they run, and release or lose their lease) or partial (they wait in a
partition above p), and for waiters of p before it in turn. So every waits-for
edge goes to a higher partition, or within p to a waiter before it in the turn
of that moment (a strict order of p's waiters, `agentledger.events.lock_turns`):
the edges never close a cycle. The turn per key holds within its partition.

Lifetimes. A partial hold has no lease: its run is waiting, not executing, so
nothing renews it, and a lease that ran out while the run legitimately waits
on a later partition would drop locks it needs. Only the final part has a
lease (renewed in the final partition, one call); when it expires, the other
parts are released. A release drops the parts from the highest partition down,
so what a crash leaves is always a prefix of lower parts. A part is sent on by
whoever's call granted it; if that process dies first, the waiting run's
re-ask (the sweeper's) finds the partial hold again and sends it on, and every
expiry pass also sends on the partial holds it sees (a hold whose run ended
goes on, is granted, and its unrenewed lease ends it). A part sent on after its
request was released (a race between a sender and the release) queues for a
request nobody will use: its run ignores the grant, and the unrenewed lease
ends it, so it holds that partition's keys for a lease at most. With N = 1
this is `agentledger.events.locks` exactly.

`Cascade` is the plan both adapters follow (ask the lowest partition with parts
pending, send on what it grants partially); `Partitioned` applies it to pure
tables: the model the Redis adapter is tested against."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from agentledger.events.locks import (
    Grant,
    LockTable,
    Mode,
    Request,
    close,
    closed_until,
    enqueue,
    expire,
    release_all,
    renew,
)


def partition_of(key: str, n: int) -> int:
    """A resource's partition: stable across processes and versions (crc32)."""
    return zlib.crc32(key.encode()) % n


def split(keys: Mapping[str, Mode], n: int) -> list[tuple[int, dict[str, Mode]]]:
    """The request's keys by partition, in ascending partition order."""
    by: dict[int, dict[str, Mode]] = {}
    for key, mode in keys.items():
        by.setdefault(partition_of(key, n), {})[key] = mode
    return sorted(by.items())


def partitions(keys: Iterable[str], n: int) -> list[int]:
    return sorted({partition_of(k, n) for k in keys})


def final_partition(keys: Iterable[str], n: int) -> int:
    """Where a request's lease is: its highest partition."""
    return max((partition_of(k, n) for k in keys), default=0)


def first_part(r: Request, n: int) -> tuple[int, Request]:
    parts = split(r.keys, n) or [(0, {})]
    p, keys = parts[0]
    final = len(parts) == 1
    whole, limits = dict(r.keys), dict(r.limits)
    return p, Request(r.id, keys, r.lease_s, final, {}, whole, limits, r.run, r.tenant)


def onward(part: Request, tokens: Mapping[str, int], n: int) -> tuple[int, Request]:
    """The part after `part` (granted partially with `tokens`), carrying them."""
    here = partition_of(next(iter(part.keys)), n)
    q, keys = next((q, keys) for q, keys in split(part.whole, n) if q > here)
    final = q == final_partition(part.whole, n)
    carried = dict(tokens)
    return q, replace(part, keys=keys, final=final, carried=carried)


@dataclass
class Cascade:
    """Parts to ask, per partition; asked lowest partition first, so a partition is
    asked at most once per cascade (a partial grant only adds parts above it)."""

    n: int
    pending: dict[int, dict[str, Request]] = field(default_factory=dict)
    finals: list[Grant] = field(default_factory=list)

    def add(self, p: int, part: Request) -> None:
        self.pending.setdefault(p, {}).setdefault(part.id, part)

    def next(self) -> tuple[int, list[Request]] | None:
        if not self.pending:
            return None
        p = min(self.pending)
        return p, list(self.pending.pop(p).values())

    def drop(self, request_ids: Iterable[str]) -> None:
        """Requests that ended: none of their parts goes on."""
        gone = set(request_ids)
        for p in list(self.pending):
            left = {rid: r for rid, r in self.pending[p].items() if rid not in gone}
            if left:
                self.pending[p] = left
            else:
                del self.pending[p]

    def granted(self, grants: Iterable[tuple[Grant, Request]]) -> None:
        """What a partition granted: final grants are the answer, partial ones go on."""
        for grant, part in grants:
            if grant.final:
                self.finals.append(grant)
            else:
                self.add(*onward(part, grant.tokens, self.n))


def release_plan(requests: Mapping[str, Iterable[str]], n: int) -> list[tuple[int, list[str]]]:
    """Which ids to release in which partition (id -> its keys), highest partition first."""
    by: dict[int, list[str]] = {}
    for rid, keys in requests.items():
        for p in partitions(keys, n):
            by.setdefault(p, []).append(rid)
    return sorted(by.items(), reverse=True)


# --- the model: the plan applied to pure tables ---------------------------------------


@dataclass(frozen=True)
class Partitioned:
    tables: tuple[LockTable, ...]

    @staticmethod
    def empty(n: int) -> Partitioned:
        return Partitioned(tuple(LockTable() for _ in range(n)))

    @property
    def n(self) -> int:
        return len(self.tables)

    def _with(self, p: int, t: LockTable) -> Partitioned:
        return replace(self, tables=(*self.tables[:p], t, *self.tables[p + 1 :]))


def ask_part(
    t: LockTable, parts: Sequence[Request], *, now: float, again: bool
) -> tuple[LockTable, list[tuple[Grant, Request]]]:
    """One partition asked for `parts`: its new grants, then (`again`) what the parts
    already held hold; a partial hold asked again always goes on."""
    held = [r.id for r in parts if r.id in t.held]
    t, grants = enqueue(t, parts, now=now)
    out = [(g, t.requests[g.id]) for g in grants]
    for rid in dict.fromkeys(held):
        g = t.holding(rid)
        assert g is not None
        if again or not g.final:
            out.append((g, t.requests[rid]))
    return t, out


def held_partially(t: LockTable) -> list[tuple[Grant, Request]]:
    return [(Grant(rid, dict(t.held[rid]), 0.0, False), t.requests[rid]) for rid in t.partials()]


def run_cascade(m: Partitioned, c: Cascade, *, now: float, again: bool) -> Partitioned:
    while (step := c.next()) is not None:
        p, parts = step
        t, grants = ask_part(m.tables[p], parts, now=now, again=again)
        m = m._with(p, t)
        c.granted(grants)
    return m


def enqueue_all(
    m: Partitioned, requests: Iterable[Request], *, now: float
) -> tuple[Partitioned, list[Grant]]:
    """Queue requests in order (each at its first partition) and follow what is granted.
    A request asked again learns its final grant, or is sent on from its partial hold."""
    c = Cascade(m.n)
    for r in requests:
        c.add(*first_part(r, m.n))
    m = run_cascade(m, c, now=now, again=True)
    return m, c.finals


def release_many(
    m: Partitioned, requests: Mapping[str, Iterable[str]], *, now: float
) -> tuple[Partitioned, list[Grant]]:
    """Drop requests (id -> keys) from every partition they touch, highest first; then
    follow the grants that lets through."""
    c = Cascade(m.n)
    for p, ids in release_plan(requests, m.n):
        t, grants = release_all(m.tables[p], ids, now=now)
        m = m._with(p, t)
        c.granted((g, t.requests[g.id]) for g in grants)
    m = run_cascade(m, c, now=now, again=False)
    return m, c.finals


def expire_all(m: Partitioned, *, now: float) -> tuple[Partitioned, list[Request], list[Grant]]:
    """Each partition ends its run-out leases (final parts); the expired requests lose
    their other parts; every partial hold is sent on again (see the module doc)."""
    c = Cascade(m.n)
    gone: list[Request] = []
    for p in range(m.n):
        before = m.tables[p]
        t, expired, grants = expire(before, now=now)
        gone += [before.requests[rid] for rid in expired]
        c.granted((g, t.requests[g.id]) for g in grants)
        c.granted(held_partially(t))
        m = m._with(p, t)
    lower = {r.id: r.whole or r.keys for r in gone}
    c.drop(lower)
    for p, ids in release_plan(lower, m.n):
        t, grants = release_all(m.tables[p], ids, now=now)
        m = m._with(p, t)
        c.granted((g, t.requests[g.id]) for g in grants)
    m = run_cascade(m, c, now=now, again=False)
    return m, gone, c.finals


def renew_final(
    m: Partitioned, request_id: str, keys: Iterable[str], *, now: float
) -> tuple[Partitioned, bool]:
    p = final_partition(keys, m.n)
    t, renewed = renew(m.tables[p], request_id, now=now)
    return m._with(p, t), renewed


def close_all(m: Partitioned, keys: Mapping[str, float], *, now: float) -> Partitioned:
    """Close slot keys (key -> seconds), each in its partition."""
    for p, part in split(dict.fromkeys(keys, Mode.SLOT), m.n):
        m = m._with(p, close(m.tables[p], {k: keys[k] for k in part}, now=now))
    return m


def waiting_on(m: Partitioned, keys: Iterable[str]) -> list[str]:
    """The requests waiting on any of `keys`, partition by partition in arrival order."""
    out: list[str] = []
    for p, part in split(dict.fromkeys(keys, Mode.SLOT), m.n):
        t = m.tables[p]
        out += [r for r in t.waiting() if any(k in t.requests[r].keys for k in part)]
    return out


def look_all(m: Partitioned, keys: Iterable[str], *, now: float) -> dict[str, tuple[int, float]]:
    """Each key's holders, and until when it is closed (0.0: open)."""
    out: dict[str, tuple[int, float]] = {}
    for p, part in split(dict.fromkeys(keys, Mode.SLOT), m.n):
        t = m.tables[p]
        shut = closed_until(t, part, now=now)
        out |= {k: (len(t.holders.get(k, {})), shut.get(k, 0.0)) for k in part}
    return out
