"""The lock table on Redis: one registered Lua script (`locks.lua`) that applies the
rule of `events.locks` atomically. All keys of a partition share one hash tag,
so the script runs on Redis Cluster too (on one slot)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib.resources import files
from typing import Any

import redis

from events.lock_step import LockAsk
from events.locks import Grant
from services.adapters.locks.port import Granted, Holder, LockReply
from services.adapters.store.port import Outgoing

_SCRIPT = files("services.adapters.locks").joinpath("locks.lua").read_text()


class RedisLocks:
    def __init__(self, client: redis.Redis, keys: list[str], *, lease_s: float):
        self._script = client.register_script(_SCRIPT)
        self._keys = keys
        self.lease_s = lease_s

    # `now` (seconds) replaces Redis's clock: only the differential test of the rule gives it

    def enqueue(
        self,
        asks: Sequence[LockAsk],
        notify: Sequence[Outgoing | None],
        *,
        now: float | None = None,
    ) -> LockReply:
        payload = [
            {
                "id": a.request_id,
                "keys": {k: str(m) for k, m in a.keys.items()},
                "lease_s": self.lease_s,
                "run": a.run_id,
                "call": a.call_id,
                "notify": _notice(n),
            }
            for a, n in zip(asks, notify, strict=True)
        ]
        return self._call("enqueue", json.dumps(payload), now)

    def release(self, request_ids: Sequence[str], *, now: float | None = None) -> LockReply:
        if not request_ids:
            return LockReply()
        return self._call("release", json.dumps(list(request_ids)), now)

    def renew(self, request_id: str, *, now: float | None = None) -> bool:
        return self._call("renew", request_id, now).renewed

    def expire(self, *, now: float | None = None) -> LockReply:
        return self._call("expire", "", now)

    def _call(self, op: str, payload: str, now: float | None) -> LockReply:
        at = "" if now is None else round(now * 1_000_000)
        raw = self._script(keys=self._keys, args=[op, at, payload])
        out = json.loads(raw)
        grants = [
            Granted(
                Grant(
                    g["id"],
                    {k: int(v) for k, v in g["tokens"].items()},
                    int(g["lease_until_us"]) / 1_000_000,
                ),
                Holder(g["id"], g.get("run") or "", g.get("call") or ""),
                _outgoing(g.get("notify")),
            )
            for g in out["grants"]
        ]
        expired = [Holder(e["id"], e.get("run") or "", e.get("call") or "") for e in out["expired"]]
        return LockReply(grants, expired, bool(out["renewed"]))


def _notice(n: Outgoing | None) -> dict[str, str] | None:
    return None if n is None else {"stream": n.stream, "data": n.data.decode()}


def _outgoing(raw: Any) -> Outgoing | None:
    if not isinstance(raw, dict):
        return None
    return Outgoing(raw["stream"], raw["data"].encode())
