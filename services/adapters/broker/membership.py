"""The live processes of a group (one pool of one task queue and tool set, the
intakes, the sweepers) and which shards each owns. Each process heartbeats in
the group's sorted set with Redis's own clock; a member silent for `ttl_s` is
gone. Shard s belongs to the live member that rendezvous hashing ranks first
for it, so every member computes the same owners without talking, a run is
driven by one process at a time (its cached state stays the log's), and when
a member dies its shards move to the others within `ttl_s`. During a change two
members may read one shard for a moment: harmless, since a consumer group
delivers each message once and every step checks the log."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable

import redis

# KEYS: the group's sorted set; ARGV: me, ttl_ms. Returns the live members.
_BEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 100)
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""
_LEAVE = "return redis.call('ZREM', KEYS[1], ARGV[1])"


def owner(shard: int, members: Iterable[str]) -> str | None:
    """The member rendezvous hashing ranks first for `shard`."""
    best: tuple[bytes, str] | None = None
    for m in members:
        score = hashlib.sha1(f"{m}/{shard}".encode()).digest()
        if best is None or score > best[0]:
            best = (score, m)
    return best[1] if best else None


class Membership:
    def __init__(self, client: redis.Redis, key: str, me: str, *, ttl_s: float):
        self._client = client
        self.key = key
        self.me = me
        self.ttl_s = ttl_s
        self._beat = client.register_script(_BEAT)
        self._leave = client.register_script(_LEAVE)
        self._members: tuple[str, ...] = (me,)
        self._lock = threading.Lock()

    def beat(self) -> tuple[str, ...]:
        """Say we are alive; learn who else is."""
        raw = self._beat(keys=[self.key], args=[self.me, int(self.ttl_s * 1000)])
        members = tuple(sorted(m.decode() if isinstance(m, bytes) else m for m in raw))
        with self._lock:
            self._members = members if self.me in members else (*members, self.me)
        return self._members

    @property
    def members(self) -> tuple[str, ...]:
        with self._lock:
            return self._members

    def owned(self, shards: Iterable[int]) -> list[int]:
        members = self.members
        return [s for s in shards if owner(s, members) == self.me]

    def leave(self) -> None:
        """A clean stop: the others take our shards at their next beat."""
        try:
            self._leave(keys=[self.key], args=[self.me])
        except redis.RedisError:
            pass  # we are going anyway; the ttl does it
