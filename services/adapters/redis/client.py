"""The Redis client every process uses (also without the worker pools: the
read-only CLI commands import only this, not the composition root)."""

from __future__ import annotations

import redis


def redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=30, health_check_interval=30)
