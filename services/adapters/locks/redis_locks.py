"""The lock service's Redis side: one registered Lua script (`locks.lua`) that
applies the rule of `events.locks` atomically. All lock keys share one hash
tag, so the script runs on Redis Cluster too (on one slot)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files

import redis

from events.lock_step import LockAsk
from events.locks import Grant

_SCRIPT = files("services.adapters.locks").joinpath("locks.lua").read_text()


@dataclass(frozen=True)
class LockReply:
    grants: list[Grant]
    expired: list[str]
    renewed: bool


class LockService:
    def __init__(self, client: redis.Redis, prefix: str, *, lease_s: float):
        self._script = client.register_script(_SCRIPT)
        base = f"{prefix}:{{locks}}"
        self._keys = [f"{base}:{n}" for n in ("req", "order", "holders", "tokens", "leases", "seq")]
        self.lease_s = lease_s

    def enqueue(self, asks: Sequence[LockAsk], *, now: float) -> LockReply:
        """Queue the requests in order; the reply lists every grant made, including
        those asked for again (a redelivery learns what it had been given)."""
        payload = [
            {
                "id": a.request_id,
                "keys": {k: str(m) for k, m in a.keys.items()},
                "lease_s": self.lease_s,
            }
            for a in asks
        ]
        return self._call("enqueue", now, json.dumps(payload))

    def release(self, request_id: str, *, now: float) -> LockReply:
        return self._call("release", now, request_id)

    def renew(self, request_id: str, *, now: float) -> bool:
        return self._call("renew", now, request_id).renewed

    def expire(self, *, now: float) -> LockReply:
        return self._call("expire", now, "")

    def _call(self, op: str, now: float, payload: str) -> LockReply:
        raw = self._script(keys=self._keys, args=[op, int(now * 1_000_000), payload])
        out = json.loads(raw)
        grants = [
            Grant(
                g["id"],
                {k: int(v) for k, v in g["tokens"].items()},
                int(g["lease_until_us"]) / 1_000_000,
            )
            for g in out["grants"]
        ]
        return LockReply(grants, list(out["expired"]), bool(out["renewed"]))
