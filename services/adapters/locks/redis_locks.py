"""The lock table on Redis: one registered Lua script (`locks.lua`) that applies the
rule of `agentledger.events.locks` atomically to one partition of the table, all of whose
keys share one hash tag (one slot: the script runs on Redis Cluster too). A
request over several partitions follows the plan of `agentledger.events.lock_partitions`:
one script call per partition, lowest first, each partial grant sent on with
the tokens so far; callers see only final grants. Never a multi-slot command."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from importlib.resources import files
from typing import Any

import redis

from agentledger.events.lock_partitions import (
    Cascade,
    final_partition,
    first_part,
    release_plan,
    split,
)
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Grant, Mode, Request
from agentledger.services.adapters.locks.port import Granted, Holder, KeyLook, LockReply
from agentledger.services.adapters.redis.replicas import ReplicaAcks
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.keys import Keys

_SCRIPT = files("agentledger.services.adapters.locks").joinpath("locks.lua").read_text()
Who = dict[str, tuple[Holder, Outgoing | None]]  # request id -> who asked, what tells them


class RedisLocks:
    def __init__(self, client: redis.Redis, keys: Keys, *, lease_s: float, replica_acks: int = 0):
        self._script = client.register_script(_SCRIPT)
        self._acks = ReplicaAcks(client, replica_acks)  # a grant a failover keeps, with N >= 1
        self._tables = [keys.locks(p) for p in range(keys.lock_partitions)]
        self.partitions = len(self._tables)
        self.lease_s = lease_s
        self.calls = 0  # script calls made: one round trip each

    # `now` (seconds) replaces Redis's clock: only the differential test of the rule gives it

    def enqueue(
        self,
        asks: Sequence[LockAsk],
        notify: Sequence[Outgoing | None],
        *,
        now: float | None = None,
    ) -> LockReply:
        plan, who = Cascade(self.partitions), Who()
        for a, n in zip(asks, notify, strict=True):
            who.setdefault(a.request_id, (Holder(a.request_id, a.run_id, a.call_id), n))
            request = Request(
                a.request_id, a.keys, self.lease_s, limits=a.limits, run=a.run_id, tenant=a.tenant
            )
            plan.add(*first_part(request, self.partitions))
        return LockReply(self._follow(plan, who, now, again=True))

    def release(self, asks: Sequence[LockAsk], *, now: float | None = None) -> LockReply:
        plan, who = Cascade(self.partitions), Who()
        for p, ids in release_plan({a.request_id: a.keys for a in asks}, self.partitions):
            self._granted(plan, who, self._call(p, "release", json.dumps(ids), now))
        return LockReply(self._follow(plan, who, now, again=False))

    def renew(self, ask: LockAsk, *, now: float | None = None) -> bool:
        """The lease is in the request's last partition only (its other parts have none)."""
        p = final_partition(ask.keys, self.partitions)
        return bool(self._call(p, "renew", ask.request_id, now)["renewed"])

    def expire(self, *, now: float | None = None) -> LockReply:
        """Each partition ends its run-out leases; an expired request loses its other
        parts (highest first); partial holds are sent on again (their sender may have died)."""
        plan, who = Cascade(self.partitions), Who()
        expired: list[Holder] = []
        lower: dict[str, Iterable[str]] = {}
        for p in range(self.partitions):
            out = self._call(p, "expire", "", now)
            for e in out["expired"]:
                expired.append(Holder(e["id"], e.get("run") or "", e.get("call") or ""))
                lower[e["id"]] = list(_modes(e.get("whole") or e["keys"]))
            self._granted(plan, who, out)
        plan.drop(lower)
        for p, ids in release_plan(lower, self.partitions):
            self._granted(plan, who, self._call(p, "release", json.dumps(ids), now))
        return LockReply(self._follow(plan, who, now, again=False), expired)

    def close(self, keys: Mapping[str, float], *, now: float | None = None) -> LockReply:
        told: list[Outgoing] = []
        for p, part in split(dict.fromkeys(keys, Mode.SLOT), self.partitions):
            out = self._call(p, "close", json.dumps({k: keys[k] for k in part}), now)
            told += [n for raw in out.get("told") or [] if (n := _outgoing(raw)) is not None]
        return LockReply(told=list(dict.fromkeys(told)))

    def look(self, keys: Sequence[str], *, now: float | None = None) -> dict[str, KeyLook]:
        out: dict[str, KeyLook] = {}
        for p, part in split(dict.fromkeys(keys, Mode.SLOT), self.partitions):
            seen = self._call(p, "look", json.dumps(list(part)), now)["keys"]
            for k, (n, until) in seen.items():
                out[k] = KeyLook(int(n), int(until) / 1_000_000 or None)
        return out

    def usage(self) -> dict[str, tuple[int, int, float | None]]:
        """Every slot key in use, waited for or closed: (holders, waiters, closed until)."""
        out: dict[str, tuple[int, int, float | None]] = {}
        for p in range(self.partitions):
            for k, (n, waiting, until) in self._call(p, "usage", "", None)["keys"].items():
                out[k] = (int(n), int(waiting), int(until) / 1_000_000 or None)
        return out

    def _follow(self, plan: Cascade, who: Who, now: float | None, *, again: bool) -> list[Granted]:
        while (step := plan.next()) is not None:
            p, parts = step
            payload = json.dumps([_part(r, *who[r.id]) for r in parts])
            self._granted(plan, who, self._call(p, "enqueue", payload, now, "1" if again else ""))
        return [Granted(g, *who[g.id]) for g in plan.finals]

    def _granted(self, plan: Cascade, who: Who, out: Mapping[str, Any]) -> None:
        for g in out["grants"]:
            who.setdefault(g["id"], (Holder(g["id"], g.get("run") or "", g.get("call") or ""),
                                     _outgoing(g.get("notify"))))  # fmt: skip
            grant = Grant(
                g["id"],
                {k: int(v) for k, v in g["tokens"].items()},
                int(g["lease_until_us"]) / 1_000_000,
                bool(g["final"]),
            )
            keys = _modes(g["keys"])
            part = Request(
                g["id"],
                keys,
                float(g["lease_s"]),
                grant.final,
                {},
                _modes(g.get("whole") or g["keys"]),
                {k: int(m) for k, m in (g.get("limits") or {}).items()},
                g.get("run") or "",
                g.get("tenant") or "",
            )
            plan.granted([(grant, part)])

    def _call(self, p: int, op: str, payload: str, now: float | None, flag: str = "") -> Any:
        at = "" if now is None else round(now * 1_000_000)
        self.calls += 1
        return json.loads(self._acks.call(self._script, self._tables[p], [op, at, payload, flag]))


def _part(r: Request, holder: Holder, notify: Outgoing | None) -> dict[str, Any]:
    return {
        "id": r.id,
        "keys": {k: str(m) for k, m in r.keys.items()},
        "lease_s": r.lease_s,
        "final": r.final,
        "carried": {k: str(t) for k, t in r.carried.items()},  # strings: cjson keeps 14 digits
        "whole": {k: str(m) for k, m in (r.whole or r.keys).items()},
        "run": holder.run_id,
        "call": holder.call_id,
        "notify": _notice(notify),
        "limits": dict(r.limits),
        "tenant": r.tenant,
    }


def _modes(raw: Mapping[str, str]) -> dict[str, Mode]:
    return {k: Mode(m) for k, m in raw.items()}


def _notice(n: Outgoing | None) -> dict[str, str] | None:
    return None if n is None else {"stream": n.stream, "data": n.data.decode()}


def _outgoing(raw: Any) -> Outgoing | None:
    if not isinstance(raw, dict):
        return None
    return Outgoing(raw["stream"], raw["data"].encode())
