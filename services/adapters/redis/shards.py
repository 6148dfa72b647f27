"""How many shards a Redis has held runs in: the largest shard count any
deployment on it has used, recorded in the deployment's meta hash."""

from __future__ import annotations

from typing import cast

import redis

from agentledger.services.keys import Keys

# KEYS: meta; ARGV: this deployment's shard count. Returns the largest ever used.
_SHARDS = """
local m = tonumber(redis.call('HGET', KEYS[1], 'shards') or '0')
local n = tonumber(ARGV[1])
if n > m then redis.call('HSET', KEYS[1], 'shards', n); m = n end
return m
"""


def shards_ever(client: redis.Redis, keys: Keys, *, record: bool = True) -> range:
    """Every shard a run may be in: as many as the largest count this Redis has seen
    (this process's counted in: `record`, a script; a reader, as ops, only reads)."""
    if not record:
        seen = cast(bytes | None, client.hget(keys.meta, "shards"))
        return range(max(int(seen or 0), keys.shards))
    return range(int(client.register_script(_SHARDS)(keys=[keys.meta], args=[keys.shards])))
