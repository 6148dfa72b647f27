"""The idempotency ledger, by operation key (one Redis hash per key, named by a
digest of the key, changed by one script). The same key with the same request replays the stored result
instead of running the tool again, whichever run or call asks; the same key
with a different request is refused; a key whose write is still pending (in
flight, or its outcome unknown) is not run a second time."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import redis

from agentledger.services.adapters.ledger.port import Verdict
from agentledger.services.adapters.redis.replicas import ReplicaAcks
from agentledger.services.keys import Keys

_SCRIPT = files("agentledger.services.adapters.ledger").joinpath("ledger.lua").read_text()


class RedisLedger:
    def __init__(
        self, client: redis.Redis, keys: Keys, *, keep_s: float = 30 * 86400, replica_acks: int = 0
    ):
        self._script = client.register_script(_SCRIPT)
        self._acks = ReplicaAcks(client, replica_acks)
        self._keys = keys
        self._keep_s = int(keep_s)  # a done operation is replayed for this long (0: forever)

    def begin(self, op_key: str, request: str, owner: str, *, now: float) -> Verdict:
        reply = [
            x.decode() if isinstance(x, bytes) else x
            for x in self._call("begin", op_key, request, owner, now)
        ]
        match reply:
            case ["run"]:
                return Verdict("run")
            case ["replay", owner_, result]:
                return Verdict("replay", owner_, json.loads(result))
            case ["conflict", owner_]:
                return Verdict("conflict", owner_)
            case ["in_progress", owner_, started, redis_now]:
                # the age by Redis's clock, as a time on the caller's: no clock skew between hosts
                return Verdict(
                    "in_progress", owner_, since=now - (float(redis_now) - float(started))
                )
        raise RuntimeError(f"ledger script replied {reply!r}")

    def finish(self, op_key: str, request: str, owner: str, result: Any, *, now: float) -> None:
        self._call("finish", op_key, request, owner, now, json.dumps(result))

    def abandon(self, op_key: str) -> None:
        """A write that surely did not happen: the key may be used again."""
        self._call("abandon", op_key, "", "", 0.0)

    def _call(
        self, op: str, op_key: str, request: str, owner: str, now: float, result: str = ""
    ) -> Any:
        key = self._keys.ledger(op_key)
        return self._acks.call(
            self._script, [key], [op, request, owner, repr(now), result, self._keep_s]
        )
