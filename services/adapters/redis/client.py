"""The Redis client every process uses (also without the worker pools: the
read-only CLI commands import only this, not the composition root).

The server at the URL decides the kind: a Redis Cluster node (`INFO cluster`
says `cluster_enabled:1`; any node's address works) gets redis-py's
`RedisCluster`, anything else a plain `Redis`. One INFO when the client is
made, none per command. The rest of the code holds either as `redis.Redis`
(the commands it uses have the same signatures) and asks `is_cluster` where a
command must not span slots."""

from __future__ import annotations

from typing import Any, cast

import redis
from redis.cluster import RedisCluster

OPTIONS: dict[str, Any] = {"socket_timeout": 30, "health_check_interval": 30}


def redis_client(url: str) -> redis.Redis:
    plain = redis.Redis.from_url(url, **OPTIONS)
    if not _cluster_enabled(plain):
        return plain
    plain.close()
    return cast(redis.Redis, RedisCluster.from_url(url, **OPTIONS))


def is_cluster(client: object) -> bool:
    return isinstance(client, RedisCluster)


def _cluster_enabled(client: redis.Redis) -> bool:
    try:
        info: Any = client.info("cluster")
    except redis.ResponseError:  # INFO refused (an ACL user without it): a plain server
        return False
    except redis.RedisError:
        return False  # nothing answers: the caller's first command says so
    return bool(int(info.get("cluster_enabled", 0)))


def node_client(client: redis.Redis, key: str) -> redis.Redis:
    """The client of the one server that holds `key`: `client` itself on a plain
    Redis; on a cluster, the master of the key's slot (for commands such as
    WAIT that must go out on the connection of the write they follow)."""
    if not isinstance(client, RedisCluster):
        return client
    node = client.get_node_from_key(key)
    return cast(redis.Redis, client.get_redis_connection(node))


def refresh(client: redis.Redis) -> None:
    """Learn the cluster's slots again (after a failover moved them); no-op on a plain Redis."""
    if isinstance(client, RedisCluster):
        try:
            client.nodes_manager.initialize()
        except redis.RedisError:
            pass  # no node answers yet: the next command tries again
