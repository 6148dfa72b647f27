"""The live processes of a group (one pool of one task queue and tool set, the
intakes, the sweepers) and which shards each owns. Each process heartbeats in
the group's sorted set with Redis's own clock; a member silent for `ttl_s` is
gone. Shards are dealt to the live members in turn (`owner`), so every member
computes the same owners without talking, a run is driven by one process at a
time (its cached state stays the log's), and when a member dies its shards
move to the others within `ttl_s`. During a change two members may read one
shard for a moment: harmless, since a consumer group delivers each message
once and every step checks the log.

Members of older code ranked shards by rendezvous hashing. A member that deals
also beats in a second set (the group's key + ":dealing"); while a live member
of the group is missing there (older code, in a rolling upgrade), every member
that deals ranks by rendezvous hashing too (`rendezvous_owner`), so the group
never disagrees about a shard for longer than a beat: a shard no member thinks
its own would wait unread."""

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
    """The member that owns `shard`: the live members in order of their names, dealt
    the shards in turn (shard s to the (s mod n)-th of n). Every member computes the
    same owner from the shard and the members alone, whatever shards it knows of,
    and a pool's shards split evenly between its processes (rendezvous hashing left
    one of two processes 5 or fewer of 16 shards in a fifth of starts). When a
    member comes or goes most shards move: each run then loads its state once on
    its new owner."""
    ranked = sorted(set(members))
    return ranked[shard % len(ranked)] if ranked else None


def rendezvous_owner(shard: int, members: Iterable[str]) -> str | None:
    """The member rendezvous hashing ranks first for `shard`: the rule of older code,
    kept while a member of it lives (see the module's docstring)."""
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
        self.dealing_key = f"{key}:dealing"  # the group's members that deal shards in turn
        self.me = me
        self.ttl_s = ttl_s
        self._beat = client.register_script(_BEAT)
        self._leave = client.register_script(_LEAVE)
        self._members: tuple[str, ...] = (me,)
        self._all_deal = True
        self._lock = threading.Lock()

    def beat(self) -> tuple[str, ...]:
        """Say we are alive; learn who else is, and whether they all deal shards in turn."""
        args: list[str | int] = [self.me, int(self.ttl_s * 1000)]
        raw = self._beat(keys=[self.key], args=args)
        dealing = self._beat(keys=[self.dealing_key], args=args)  # two slots on a cluster
        members = tuple(sorted(_names(raw)))
        with self._lock:
            self._members = members if self.me in members else (*members, self.me)
            self._all_deal = set(self._members) <= {*_names(dealing), self.me}
        return self._members

    @property
    def members(self) -> tuple[str, ...]:
        with self._lock:
            return self._members

    def owned(self, shards: Iterable[int]) -> list[int]:
        with self._lock:
            members, all_deal = self._members, self._all_deal
        rule = owner if all_deal else rendezvous_owner
        return [s for s in shards if rule(s, members) == self.me]

    def leave(self) -> None:
        """A clean stop: the others take our shards at their next beat."""
        try:
            for key in (self.key, self.dealing_key):
                self._leave(keys=[key], args=[self.me])
        except redis.RedisError:
            pass  # we are going anyway; the ttl does it


def _names(raw: Iterable[bytes | str]) -> list[str]:
    return [m.decode() if isinstance(m, bytes) else m for m in raw]
