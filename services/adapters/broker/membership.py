"""The live processes of a group (one pool of one task queue and tool set, the
intakes, the sweepers) and which shards each owns. Each process heartbeats in
the group's sorted set with Redis's own clock; a member silent for `ttl_s` is
gone. Shards go to the live members by rendezvous hashing with bounded loads
(`balanced_owners`): shard by shard, each to the member ranked highest for it
that holds fewer than its even share, so every member computes the same owners
without talking, a pool's shards split evenly (8 and 8 of 16 between two
processes, where plain rendezvous hashing left one of them 5 or fewer in a fifth
of starts), and when a member dies its shards move to the others within `ttl_s`.
What owning means is the group's: an intake reads the inbox partitions it owns,
a sweeper sweeps its shards, and a pool's process ticks its shards' streams
(promotes delayed messages, takes over a dead reader's) while it reads every
shard's. During a change two members may own one shard for a moment: harmless,
since a consumer group delivers each message once and every step checks the log.

Members of older code rank by plain rendezvous hashing (`rendezvous_owner`) and
beat in the group's set alone. A member of this code also marks itself in a
second set (the group's key + ":balanced"), before it beats and for twice as
long, and reads that set after it beats: a member seen in the first set is in
the second by then. While a live member of the group is missing there (older
code, in a rolling upgrade), every member ranks by plain rendezvous hashing
too, so no shard goes unowned."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache

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
MARKED_FOR = 2  # a member stays in the ":balanced" set this many ttls


def _score(member: str, shard: int) -> bytes:
    return hashlib.sha1(f"{member}/{shard}".encode()).digest()


def rendezvous_owner(shard: int, members: Iterable[str]) -> str | None:
    """The member plain rendezvous hashing ranks first for `shard` (older code's rule)."""
    best: tuple[bytes, str] | None = None
    for m in members:
        score = _score(m, shard)
        if best is None or score > best[0]:
            best = (score, m)
    return best[1] if best else None


@lru_cache(maxsize=64)
def balanced_owners(shards: tuple[int, ...], members: tuple[str, ...]) -> dict[int, str]:
    """Rendezvous hashing with bounded loads: in shard order, each shard goes to the
    member ranked highest for it among those holding fewer than ceil(shards/members)."""
    if not members:
        return {}
    cap = -(-len(shards) // len(members))
    load = dict.fromkeys(members, 0)
    owners: dict[int, str] = {}
    for s in shards:
        for m in sorted(members, key=lambda m: _score(m, s), reverse=True):
            if load[m] < cap:
                owners[s] = m
                load[m] += 1
                break
    return owners


class Membership:
    def __init__(self, client: redis.Redis, key: str, me: str, *, ttl_s: float):
        self._client = client
        self.key = key
        self.balanced_key = f"{key}:balanced"  # the members that rank with bounded loads
        self.me = me
        self.ttl_s = ttl_s
        self._beat = client.register_script(_BEAT)
        self._leave = client.register_script(_LEAVE)
        self._members: tuple[str, ...] = (me,)
        self._balanced = True  # every live member ranks with bounded loads
        self._lock = threading.Lock()

    def beat(self) -> tuple[str, ...]:
        """Say we are alive; learn who else is, and whether they all rank with bounded
        loads (three calls: the two keys may sit in two slots of a cluster)."""
        ttl_ms = int(self.ttl_s * 1000)
        self._beat(keys=[self.balanced_key], args=[self.me, ttl_ms * MARKED_FOR])
        members = tuple(sorted(_names(self._beat(keys=[self.key], args=[self.me, ttl_ms]))))
        marked = _names(self._client.zrange(self.balanced_key, 0, -1))  # type: ignore[arg-type]
        with self._lock:
            self._members = members if self.me in members else (*members, self.me)
            self._balanced = set(self._members) <= {*marked, self.me}
        return self._members

    @property
    def members(self) -> tuple[str, ...]:
        with self._lock:
            return self._members

    def owned(self, shards: Iterable[int]) -> list[int]:
        with self._lock:
            members, balanced = self._members, self._balanced
        shards = tuple(shards)
        if not balanced:
            return [s for s in shards if rendezvous_owner(s, members) == self.me]
        owners = balanced_owners(shards, members)
        return [s for s in shards if owners.get(s) == self.me]

    def leave(self) -> None:
        """A clean stop: the others take our shards at their next beat. Our mark in the
        second set is left to run out: taken off first, we could be seen as older code."""
        try:
            self._leave(keys=[self.key], args=[self.me])
        except redis.RedisError:
            pass  # we are going anyway; the ttl does it


def _names(raw: Sequence[bytes | str]) -> list[str]:
    return [m.decode() if isinstance(m, bytes) else m for m in raw]
