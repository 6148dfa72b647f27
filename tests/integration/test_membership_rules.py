"""How a group's members split its shards on a real Redis (`Membership`): evenly
(rendezvous hashing with bounded loads) while every live member ranks that way,
and by plain rendezvous hashing — older code's rule — while a member of older
code is alive (a rolling upgrade), so the group agrees on every shard; evenly
again once it is gone. A member that leaves is dropped at once, its mark later."""

from __future__ import annotations

import time

import redis

from agentledger.services.adapters.broker.membership import (
    Membership,
    balanced_owners,
    rendezvous_owner,
)
from agentledger.services.keys import Keys

SHARDS = tuple(range(16))
TTL_S = 60.0  # nobody falls silent by accident on a busy machine


def group(client: redis.Redis, keys: Keys, *names: str) -> list[Membership]:
    members = [Membership(client, keys.members("model.q.t"), n, ttl_s=TTL_S) for n in names]
    for _ in range(2):  # twice: each hears of the others
        for m in members:
            m.beat()
    return members


def split(members: list[Membership]) -> dict[str, list[int]]:
    return {m.me: m.owned(SHARDS) for m in members}


def test_members_of_this_code_split_the_shards_evenly(client: redis.Redis, keys: Keys) -> None:
    a, b = group(client, keys, "host:1:aa", "host:2:bb")

    owned = split([a, b])

    owners = balanced_owners(SHARDS, (a.me, b.me))
    assert owned == {n: [s for s in SHARDS if owners[s] == n] for n in owned}
    assert sorted(owned[a.me] + owned[b.me]) == list(SHARDS)
    assert len(owned[a.me]) == len(owned[b.me]) == 8


def test_while_an_older_member_lives_the_group_ranks_by_plain_rendezvous(
    client: redis.Redis, keys: Keys
) -> None:
    a, b = group(client, keys, "host:1:aa", "host:2:bb")
    older = "host:3:cc"  # beats as older code does: in the group's set alone
    client.zadd(a.key, {older: int(time.time() * 1000)})
    a.beat(), b.beat()
    everyone = (a.me, b.me, older)

    owned = split([a, b])

    assert owned == {n: [s for s in SHARDS if rendezvous_owner(s, everyone) == n] for n in owned}
    theirs = [s for s in SHARDS if rendezvous_owner(s, everyone) == older]
    assert sorted(owned[a.me] + owned[b.me] + theirs) == list(SHARDS), (
        "every shard has exactly one owner, the older member's included"
    )

    client.zrem(a.key, older)  # it stops (as it leaves, or as the ttl drops it)
    a.beat(), b.beat()
    assert len(a.owned(SHARDS)) == len(b.owned(SHARDS)) == 8, "even again"


def test_a_member_that_leaves_is_gone_at_once_and_its_mark_runs_out(
    client: redis.Redis, keys: Keys
) -> None:
    a, b = group(client, keys, "host:1:aa", "host:2:bb")

    b.leave()
    a.beat()

    assert a.members == (a.me,) and a.owned(SHARDS) == list(SHARDS)
    assert {m.decode() for m in client.zrange(a.balanced_key, 0, -1)} == {a.me, b.me}
    ttl_ms = client.pttl(a.balanced_key)
    assert 0 < ttl_ms <= TTL_S * 1000 * 2 * 100, "the mark's set expires with its members"


def test_a_mark_counts_for_two_ttls_and_a_beat_for_one(client: redis.Redis, keys: Keys) -> None:
    (a,) = group(client, keys, "host:1:aa")
    now_ms = int(time.time() * 1000)
    ttl_ms = TTL_S * 1000
    other = "host:8:zz"  # beat half a ttl ago, marked (before it) one and a half ago
    client.zadd(a.key, {other: now_ms - ttl_ms / 2})
    client.zadd(a.balanced_key, {other: now_ms - ttl_ms * 1.5})

    a.beat()
    assert a.members == (a.me, other)
    plain = [s for s in SHARDS if rendezvous_owner(s, (a.me, other)) == a.me]
    assert len(plain) == 9, "these two names split unevenly by plain rendezvous hashing"
    assert len(a.owned(SHARDS)) == 8, "still marked: the group ranks with bounded loads"

    client.zadd(a.balanced_key, {other: now_ms - ttl_ms * 2.5})  # a mark gone stale
    a.beat()
    assert a.owned(SHARDS) == plain
