"""Writes that wait for replicas (`AGENTLEDGER_REPLICA_ACKS=N`): a script call and
a `WAIT N timeout` on the same connection, pipelined (one round trip), so the
reply means N replicas hold the write as well as the master. With N = 0 the
script is called as it always was: no WAIT, no extra round trip.

On a cluster the pipeline goes to the master of the script's slot (WAIT counts
the replicas of the server it is sent to, for the writes of its connection).
While fewer replicas than asked have the write (one is away: a failover, a
restart), WAIT is sent again on the same connection, up to PATIENCE_S; then
the write goes on held by fewer replicas, with a warning in the log — raising
would strand what it wrote on the master (a claim with no tool run, a pending
ledger entry that blocks its own retry). `strict=True` raises `NotReplicated`
instead (retryable: the write is on the master). A slot
that moved (a failover) is learnt again and reported as a lost connection."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from agentledger.services.adapters.redis.client import is_cluster, node_client, refresh
from agentledger.services.adapters.redis.direct import ThreadConnections
from agentledger.services.errors import ServiceError

log = logging.getLogger(__name__)
WAIT_TIMEOUT_MS = 1000  # one WAIT
PATIENCE_S = 30.0  # WAITs again this long before a write counts as not replicated


class NotReplicated(ServiceError):
    retryable = True

    def __init__(self, key: str, wanted: int, acked: int):
        self.key, self.wanted, self.acked = key, wanted, acked
        super().__init__(f"a write to {key!r} reached {acked} of {wanted} replica(s) in time")


class ReplicaAcks:
    def __init__(
        self,
        client: redis.Redis,
        replicas: int,
        *,
        timeout_ms: int = WAIT_TIMEOUT_MS,
        patience_s: float = PATIENCE_S,
        strict: bool = False,
    ):
        self._client = client
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self.patience_s = patience_s
        self.strict = strict
        self._direct = None if is_cluster(client) else ThreadConnections(client)

    def call(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        if self.replicas <= 0:
            if self._direct is not None:
                return self._direct.call(script, keys, args)
            return script(keys=keys, args=args)
        node = node_client(self._client, keys[0])
        for _ in range(2):
            try:
                return self._call_and_wait(node, script, keys, args)
            except NoScriptError:
                node.script_load(script.script)
            except (MovedError, AskError, TryAgainError) as exc:
                refresh(self._client)
                raise redis.ConnectionError(f"the slot of {keys[0]!r} moved: {exc}") from None
            except (redis.ConnectionError, redis.TimeoutError):
                refresh(self._client)
                raise
        raise NoScriptError("the script could not be loaded")

    def _call_and_wait(
        self, node: redis.Redis, script: Script, keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """EVALSHA and WAIT in one round trip on one connection; while too few
        replicas have it (one was away: a failover, a restart), WAIT again on
        that connection — its offset is the write's — up to `patience_s`."""
        pool = node.connection_pool
        conn: Any = pool.get_connection()
        try:
            conn.send_packed_command(
                conn.pack_commands(
                    [
                        ("EVALSHA", script.sha, len(keys), *keys, *args),
                        ("WAIT", self.replicas, self.timeout_ms),
                    ]
                )
            )
            try:
                reply = conn.read_response()
            finally:
                acked = conn.read_response()  # the WAIT's reply, read whatever the first was
            deadline = time.monotonic() + self.patience_s
            while int(acked) < self.replicas and time.monotonic() < deadline:
                conn.send_command("WAIT", self.replicas, self.timeout_ms)
                acked = conn.read_response()
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        if int(acked) < self.replicas:
            short = NotReplicated(keys[0], self.replicas, int(acked))
            if self.strict:
                raise short
            log.warning("%s after %.0f s; going on", short, self.patience_s)
        return reply
