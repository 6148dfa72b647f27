"""The resource-lock rule, pure. A call asks for all its resources at once, each
read or write, and gets all or none, so there is no deadlock. Read/read
shares; read/write and write/write on the same key exclude. Waiters are served
in arrival order per key: a request is granted only when it conflicts with no
holder and with no earlier waiter on any of its keys, so a stream of reads
cannot starve a write.

`services/locks.lua` does the same atomically in Redis; a test runs random
scenarios through both and compares. Fencing tokens are monotonic per key:
max(previous + 1, now in microseconds), so they stay monotonic even when the
counter itself is lost with a Redis restart, as long as clocks do not go back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum


class Mode(StrEnum):
    READ = "r"
    WRITE = "w"


def conflicts(a: Mode, b: Mode) -> bool:
    return a is Mode.WRITE or b is Mode.WRITE


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    keys: Mapping[str, Mode]  # resource -> mode
    lease_s: float


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    tokens: Mapping[str, int]
    lease_until: float


@dataclass(frozen=True)
class LockTable:
    """Requests in arrival order (held ones have a lease), holders per key, tokens."""

    requests: Mapping[str, Request] = field(default_factory=dict)
    holders: Mapping[str, Mapping[str, Mode]] = field(default_factory=dict)  # key -> id -> mode
    tokens: Mapping[str, int] = field(default_factory=dict)  # key -> last fencing token
    leases: Mapping[str, float] = field(default_factory=dict)  # holder id -> lease_until

    def waiting(self) -> list[str]:
        return [rid for rid in self.requests if rid not in self.leases]


def resources(reads: Iterable[str], writes: Iterable[str]) -> dict[str, Mode]:
    """A write to a key also covers reading it."""
    keys = {k: Mode.READ for k in reads}
    keys.update({k: Mode.WRITE for k in writes})
    return keys


def enqueue(
    t: LockTable, requests: Iterable[Request], *, now: float
) -> tuple[LockTable, list[Grant]]:
    """Queue requests in the order given, then grant what can be granted."""
    reqs = dict(t.requests)
    for r in requests:
        reqs.setdefault(r.id, r)  # asked twice (a redelivered message): one request
    return pump(replace(t, requests=reqs), now=now)


def release(t: LockTable, request_id: str, *, now: float) -> tuple[LockTable, list[Grant]]:
    """Drop a request, held or waiting; a stale or unknown id changes nothing."""
    if request_id not in t.requests:
        return t, []
    return pump(_drop(t, {request_id}), now=now)


def expire(t: LockTable, *, now: float) -> tuple[LockTable, list[str], list[Grant]]:
    """Holders whose lease ran out lose their locks; the lock passes on."""
    expired = sorted(h for h, until in t.leases.items() if until <= now)
    if not expired:
        return t, [], []
    t, grants = pump(_drop(t, set(expired)), now=now)
    return t, expired, grants


def _drop(t: LockTable, ids: set[str]) -> LockTable:
    reqs = {k: v for k, v in t.requests.items() if k not in ids}
    holders = {k: {h: m for h, m in hs.items() if h not in ids} for k, hs in t.holders.items()}
    leases = {k: v for k, v in t.leases.items() if k not in ids}
    return LockTable(reqs, {k: v for k, v in holders.items() if v}, t.tokens, leases)


def renew(t: LockTable, request_id: str, *, now: float) -> tuple[LockTable, bool]:
    if request_id not in t.leases:
        return t, False  # not a holder any more: its lease expired
    lease = now + t.requests[request_id].lease_s
    return replace(t, leases={**t.leases, request_id: lease}), True


def pump(t: LockTable, *, now: float) -> tuple[LockTable, list[Grant]]:
    """Grant, in arrival order, each waiting request that conflicts with no holder
    and with no earlier waiter still waiting on one of its keys."""
    grants: list[Grant] = []
    blocked: dict[str, Mode] = {}  # key -> strongest mode an earlier waiter still wants
    for rid in t.waiting():
        r = t.requests[rid]
        if _free(t, r, blocked):
            t, grant = _grant(t, r, now)
            grants.append(grant)
        else:
            for key, mode in r.keys.items():
                blocked[key] = Mode.WRITE if mode is Mode.WRITE else blocked.get(key, Mode.READ)
    return t, grants


def _free(t: LockTable, r: Request, blocked: Mapping[str, Mode]) -> bool:
    for key, mode in r.keys.items():
        if key in blocked and conflicts(mode, blocked[key]):
            return False
        if any(conflicts(mode, m) for m in t.holders.get(key, {}).values()):
            return False
    return True


def _grant(t: LockTable, r: Request, now: float) -> tuple[LockTable, Grant]:
    micros = int(now * 1_000_000)
    tokens = dict(t.tokens)
    mine: dict[str, int] = {}
    holders = {k: dict(v) for k, v in t.holders.items()}
    for key, mode in sorted(r.keys.items()):
        tokens[key] = mine[key] = max(tokens.get(key, 0) + 1, micros)
        holders.setdefault(key, {})[r.id] = mode
    lease_until = now + r.lease_s
    t = LockTable(t.requests, holders, tokens, {**t.leases, r.id: lease_until})
    return t, Grant(r.id, mine, lease_until)
