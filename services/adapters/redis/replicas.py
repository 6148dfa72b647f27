"""Writes that wait for replicas (`AGENTLEDGER_REPLICA_ACKS=N`): a script call and
a `WAIT N timeout` on the same connection, pipelined (one round trip), so the
reply means N replicas hold the write as well as the master. With N = 0 the
script is called as it always was: no WAIT, no extra round trip.

On a cluster the pipeline goes to the master of the script's slot (WAIT counts
the replicas of the server it is sent to, for the writes of its connection).
Fewer acknowledgements than asked within the timeout raise `NotReplicated`
(retryable: the write is there, a retry finds it and waits again); a slot
that moved (a failover) is learnt again and reported as a lost connection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from services.adapters.redis.client import node_client, refresh
from services.errors import ServiceError

WAIT_TIMEOUT_MS = 2000


class NotReplicated(ServiceError):
    retryable = True

    def __init__(self, key: str, wanted: int, acked: int):
        self.key, self.wanted, self.acked = key, wanted, acked
        super().__init__(f"a write to {key!r} reached {acked} of {wanted} replica(s) in time")


class ReplicaAcks:
    def __init__(self, client: redis.Redis, replicas: int, *, timeout_ms: int = WAIT_TIMEOUT_MS):
        self._client = client
        self.replicas = replicas
        self.timeout_ms = timeout_ms

    def call(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        if self.replicas <= 0:
            return script(keys=keys, args=args)
        node = node_client(self._client, keys[0])
        for _ in range(2):
            try:
                with node.pipeline(transaction=False) as pipe:
                    pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)  # type: ignore[no-untyped-call]
                    pipe.execute_command("WAIT", self.replicas, self.timeout_ms)  # type: ignore[no-untyped-call]
                    reply, acked = pipe.execute()
            except NoScriptError:
                node.script_load(script.script)
                continue
            except (MovedError, AskError, TryAgainError) as exc:
                refresh(self._client)
                raise redis.ConnectionError(f"the slot of {keys[0]!r} moved: {exc}") from None
            except (redis.ConnectionError, redis.TimeoutError):
                refresh(self._client)
                raise
            if int(acked) < self.replicas:
                raise NotReplicated(keys[0], self.replicas, int(acked))
            return reply
        raise NoScriptError("the script could not be loaded")
