"""The resource-lock rule, pure. A call asks for all its resources at once, each
read or write, and gets all or none, so there is no deadlock. Read/read
shares; read/write and write/write on the same key exclude. Waiters are served
in turn: a request is granted only when it conflicts with no holder and with no
waiter before it on any of its keys, so a stream of reads cannot starve a write.
The turn (`agentledger.events.lock_turns`) is round-robin across tenants and,
within a tenant, across its runs, each run's requests in arrival order: one
tenant's thousand waiting calls cannot hold another tenant's one behind them
(requests without a tenant or run are served in arrival order, as before).

A slot (`Mode.SLOT`, a concurrency key of `agentledger.events.limits`) is held by
up to its request's `limits[key]` holders at once. Earlier waiters keep their
slot: a request is granted a slot only while the key's holders plus the earlier
waiters still waiting on it are under its max (FIFO per key, as for locks). A slot
excludes reads and writes of the same key (their names never meet: slot keys are
`limit:…`). A slot key's token is dropped with its last holder, so keys made from
a call's arguments leave nothing behind; its next token is still larger (time).
A slot key may be *closed* until a time (`close`: a service answered "rate
limited, retry after N s"): no slot of it is granted before then, to any run; the
expiry pass that finds it lapsed reopens it and grants what waited.

`services/locks.lua` does the same atomically in Redis; a test runs random
scenarios through both and compares. Fencing tokens are monotonic per key:
max(previous + 1, now in microseconds), so they stay monotonic even when the
counter itself is lost with a Redis restart, as long as clocks do not go back.

A table may be one partition of a larger one (`agentledger.events.lock_partitions`): a
request is then asked part by part, and a part that is not its request's last
(`final=False`) is granted as a *partial hold*: held, with its tokens, but with
no lease of its own (its request is still waiting in a later partition, so no
worker renews it). The final part's grant carries the tokens of every earlier
part (`carried`). A whole request is one final part: nothing changes for it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from agentledger.events.lock_turns import granted_to, remembered, turns


class Mode(StrEnum):
    READ = "r"
    WRITE = "w"
    SLOT = "n"  # one of a concurrency key's `max` slots


def conflicts(a: Mode, b: Mode) -> bool:
    """Slots never conflict with each other (they are counted instead)."""
    return a is Mode.WRITE or b is Mode.WRITE or (a is Mode.SLOT) != (b is Mode.SLOT)


@dataclass(frozen=True, slots=True)
class Request:
    id: str
    keys: Mapping[str, Mode]  # resource -> mode (of this partition, for a part)
    lease_s: float
    final: bool = True  # False: a part held without a lease until the later ones are granted
    carried: Mapping[str, int] = field(default_factory=dict)  # tokens of the earlier parts
    whole: Mapping[str, Mode] = field(default_factory=dict)  # every key of the request ({}: keys)
    limits: Mapping[str, int] = field(default_factory=dict)  # slot key -> its max
    run: str = ""  # who asked: its turn is taken round-robin by tenant, then by run
    tenant: str = ""


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    tokens: Mapping[str, int]
    lease_until: float  # 0.0 for a partial hold
    final: bool = True


@dataclass(frozen=True)
class LockTable:
    """Requests in arrival order, holders per key, tokens; a held request has its
    tokens in `held` and, unless it is a partial hold, a lease."""

    requests: Mapping[str, Request] = field(default_factory=dict)
    holders: Mapping[str, Mapping[str, Mode]] = field(default_factory=dict)  # key -> id -> mode
    tokens: Mapping[str, int] = field(default_factory=dict)  # key -> last fencing token
    leases: Mapping[str, float] = field(default_factory=dict)  # holder id -> lease_until
    held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # holder id -> its tokens
    closed: Mapping[str, float] = field(default_factory=dict)  # slot key -> closed until
    served: Mapping[str, int] = field(default_factory=dict)  # t:<tenant> / r:<run> -> last grant
    grants: int = 0  # grants made: what `served` counts in

    def waiting(self) -> list[str]:
        return [rid for rid in self.requests if rid not in self.held]

    def partials(self) -> list[str]:
        """Partial holds, in arrival order: held, with no lease."""
        return [rid for rid in self.requests if rid in self.held and rid not in self.leases]

    def holding(self, request_id: str) -> Grant | None:
        """What a held request holds (a request asked again learns it)."""
        if request_id not in self.held:
            return None
        final = self.requests[request_id].final
        until = self.leases.get(request_id, 0.0)
        return Grant(request_id, dict(self.held[request_id]), until, final)


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
    if len(reqs) == len(t.requests):
        return t, []  # every op leaves nothing more to grant: asking again changes nothing
    return pump(replace(t, requests=reqs), now=now)


def release(t: LockTable, request_id: str, *, now: float) -> tuple[LockTable, list[Grant]]:
    """Drop a request, held or waiting; a stale or unknown id changes nothing."""
    return release_all(t, [request_id], now=now)


def release_all(
    t: LockTable, request_ids: Iterable[str], *, now: float
) -> tuple[LockTable, list[Grant]]:
    """Drop every request named, then grant what that lets through (once, in arrival order)."""
    gone = {rid for rid in request_ids if rid in t.requests}
    if not gone:
        return t, []
    return pump(_drop(t, gone), now=now)


def expire(t: LockTable, *, now: float) -> tuple[LockTable, list[str], list[Grant]]:
    """Holders whose lease ran out lose their locks; the lock passes on."""
    expired = sorted(h for h, until in t.leases.items() if until <= now)
    lapsed = {k for k, until in t.closed.items() if until <= now}
    if not expired and not lapsed:
        return t, [], []
    t = replace(t, closed={k: v for k, v in t.closed.items() if k not in lapsed})
    t, grants = pump(_drop(t, set(expired)), now=now)
    return t, expired, grants


def close(t: LockTable, keys: Mapping[str, float], *, now: float) -> LockTable:
    """Close slot keys for `keys[key]` seconds from now (a later end wins); grants nothing."""
    closed = dict(t.closed)
    for key, for_s in keys.items():
        closed[key] = max(closed.get(key, 0.0), now + for_s)
    return replace(t, closed=closed)


def closed_until(t: LockTable, keys: Iterable[str], *, now: float) -> dict[str, float]:
    """Which of `keys` are closed at `now`, and until when."""
    return {k: t.closed[k] for k in keys if t.closed.get(k, 0.0) > now}


def _drop(t: LockTable, ids: set[str]) -> LockTable:
    reqs = {k: v for k, v in t.requests.items() if k not in ids}
    holders = {k: {h: m for h, m in hs.items() if h not in ids} for k, hs in t.holders.items()}
    leases = {k: v for k, v in t.leases.items() if k not in ids}
    held = {k: v for k, v in t.held.items() if k not in ids}
    emptied = {k for k, hs in holders.items() if not hs and Mode.SLOT in t.holders[k].values()}
    tokens = {k: v for k, v in t.tokens.items() if k not in emptied}
    live = {k: v for k, v in holders.items() if v}
    return replace(t, requests=reqs, holders=live, tokens=tokens, leases=leases, held=held)


def renew(t: LockTable, request_id: str, *, now: float) -> tuple[LockTable, bool]:
    if request_id not in t.leases:
        return t, False  # not a holder any more: its lease expired
    lease = now + t.requests[request_id].lease_s
    return replace(t, leases={**t.leases, request_id: lease}), True


def pump(t: LockTable, *, now: float) -> tuple[LockTable, list[Grant]]:
    """Grant, in their turn, the waiting requests that conflict with no holder and with
    no waiter before them; again while a pass grants any (a grant changes the turn of
    those left: a tenant's next request moves up), so every op leaves the table with
    nothing more to grant."""
    grants: list[Grant] = []
    t = replace(t, served=remembered([t.requests[r] for r in t.waiting()], t.served))
    while more := _pass(t, now):
        t, granted = more
        grants += granted
    return t, grants


def _pass(t: LockTable, now: float) -> tuple[LockTable, list[Grant]] | None:
    """One pass over the waiters in their turn; None when it grants nothing. Not taken
    when every waiter is stuck behind holders or a closure (`_stuck`): it could grant
    nothing whatever the turn, and a release that frees nothing (or the pass after a
    grant that filled a key again) costs no turn."""
    if all(_stuck(t, t.requests[rid], now) for rid in t.waiting()):
        return None
    grants: list[Grant] = []
    blocked: dict[str, Mode] = {}  # key -> strongest mode an earlier waiter still wants
    kept: dict[str, int] = {}  # slot key -> earlier waiters still waiting on it
    for rid in fair(t):
        r = t.requests[rid]
        if _free(t, r, blocked, kept, now):
            t, grant = _grant(t, r, now)
            grants.append(grant)
            continue
        for key, mode in r.keys.items():
            blocked[key] = Mode.WRITE if mode is Mode.WRITE else blocked.get(key, mode)
            if mode is Mode.SLOT:
                kept[key] = kept.get(key, 0) + 1
    return (t, grants) if grants else None


def fair(t: LockTable) -> list[str]:
    """The waiting requests in their turn (`agentledger.events.lock_turns`)."""
    return turns([t.requests[r] for r in t.waiting()], t.served)


def _stuck(t: LockTable, r: Request, now: float) -> bool:
    """Whether the holders (or a closure) alone keep `r` waiting, whoever waits before
    it: `_free` with no waiter before it is false."""
    return not _free(t, r, {}, {}, now)


def _free(
    t: LockTable, r: Request, blocked: Mapping[str, Mode], kept: Mapping[str, int], now: float
) -> bool:
    for key, mode in r.keys.items():
        if mode is Mode.SLOT and t.closed.get(key, 0.0) > now:
            return False
        if key in blocked and conflicts(mode, blocked[key]):
            return False
        holders = t.holders.get(key, {})
        if any(conflicts(mode, m) for m in holders.values()):
            return False
        if mode is Mode.SLOT and len(holders) + kept.get(key, 0) >= r.limits.get(key, 1):
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
    every = {**r.carried, **mine}
    held = {**t.held, r.id: every}
    served = granted_to(r, t.served, t.grants + 1)
    t = replace(t, holders=holders, tokens=tokens, held=held, served=served, grants=t.grants + 1)
    if not r.final:  # a partial hold: no lease until the request's last part is granted
        return t, Grant(r.id, every, 0.0, False)
    lease_until = now + r.lease_s
    return replace(t, leases={**t.leases, r.id: lease_until}), Grant(r.id, every, lease_until)
