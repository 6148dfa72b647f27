"""How many partitions this deployment's lock table has: one decision, made once.

A resource's partition is crc32(name) mod N (`agentledger.events.lock_partitions`), so
changing N would move resources to partitions where their holders are not: two
processes with different counts could both grant one key. N is therefore
recorded in the deployment's `meta` hash the first time (HSETNX) and a process
whose AGENTLEDGER_LOCK_PARTITIONS differs refuses to start (ConfigError: the CLI
exits 2). Unset, a process takes the recorded count, else the default: 1 on one
Redis, where partitions only add round trips (a call over two partitions pays
two script calls, and each expiry pass one per partition) and spread nothing;
8 on a cluster, where each partition is its own hash tag and so its own slot,
spreading the lock table's load over up to 8 nodes. A lock table that was in
use before the count was recorded (a deployment of a version without
partitions: its tokens under `{lk0}`) keeps 1, the count it ran with, since
its live holders are all in partition 0. To change N, drain the
deployment (no run holds or waits for a lock) and delete the `lock_partitions`
field of the meta hash."""

from __future__ import annotations

import redis

from agentledger.events.counted import counted
from agentledger.services.adapters.redis.client import is_cluster
from agentledger.services.errors import ConfigError
from agentledger.services.keys import LOCK_PARTS, Keys
from agentledger.services.settings import Settings

VARIABLE = "AGENTLEDGER_LOCK_PARTITIONS"
FIELD = "lock_partitions"
ON_ONE_REDIS, ON_A_CLUSTER = 1, 8


def lock_partitions(client: redis.Redis, keys: Keys, settings: Settings) -> int:
    """The recorded count (recording this process's, or the default, if there is none)."""
    wanted = settings.lock_partitions
    raw = client.hget(keys.meta, FIELD)
    if raw is None:
        client.hsetnx(keys.meta, FIELD, wanted or _default(client, keys))
        raw = client.hget(keys.meta, FIELD)  # ours, or whoever recorded first
    try:
        recorded = int(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(VARIABLE, f"{keys.meta!r} records {FIELD}={raw!r}, not a count") from None
    if wanted is not None and wanted != recorded:
        raise ConfigError(
            VARIABLE,
            f"this deployment's lock table has {counted(recorded, 'partition')} (recorded in "
            f"{keys.meta!r} at its first start) and this process asks for {wanted}: the "
            "count is fixed per deployment (unset the variable to use the recorded one)",
        )
    return recorded


def _default(client: redis.Redis, keys: Keys) -> int:
    tokens = keys.locks(0)[LOCK_PARTS.index("tokens")]
    if not is_cluster(client) or client.exists(tokens):  # one Redis, or a table from before
        return ON_ONE_REDIS
    return ON_A_CLUSTER
