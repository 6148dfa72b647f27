"""How a group's members split its shards on a real Redis (`Membership`): dealt in
turn while every live member deals, and by rendezvous hashing (the rule of older
code) while a member that does not — an older process, in a rolling upgrade —
is alive, so that the group agrees on every shard; back to dealing once it is gone."""

from __future__ import annotations

import time

import redis

from services.adapters.broker.membership import Membership, owner, rendezvous_owner
from services.keys import Keys

SHARDS = range(16)
TTL_S = 60.0  # nobody falls silent by accident on a busy machine


def _group(client: redis.Redis, keys: Keys, *names: str) -> list[Membership]:
    members = [Membership(client, keys.members("model.q.t"), n, ttl_s=TTL_S) for n in names]
    for _ in range(2):  # twice: each hears of the others
        for m in members:
            m.beat()
    return members


def _split(members: list[Membership]) -> dict[str, list[int]]:
    return {m.me: m.owned(SHARDS) for m in members}


def test_members_that_all_deal_split_the_shards_in_turn(client: redis.Redis, keys: Keys) -> None:
    a, b = _group(client, keys, "host:1:aa", "host:2:bb")

    split = _split([a, b])

    assert split == {n: [s for s in SHARDS if owner(s, [a.me, b.me]) == n] for n in split}
    assert sorted(split["host:1:aa"] + split["host:2:bb"]) == list(SHARDS)
    assert len(split["host:1:aa"]) == len(split["host:2:bb"]) == 8


def test_while_an_older_member_lives_the_group_ranks_by_rendezvous(
    client: redis.Redis, keys: Keys
) -> None:
    a, b = _group(client, keys, "host:1:aa", "host:2:bb")
    older = "host:3:cc"  # beats as older code does: in the group's set alone
    client.zadd(a.key, {older: int(time.time() * 1000)})
    a.beat(), b.beat()
    theirs = [s for s in SHARDS if rendezvous_owner(s, [a.me, b.me, older]) == older]

    split = _split([a, b])

    assert split == {
        n: [s for s in SHARDS if rendezvous_owner(s, [a.me, b.me, older]) == n] for n in split
    }
    assert sorted(split["host:1:aa"] + split["host:2:bb"] + theirs) == list(SHARDS), (
        "every shard has exactly one owner, the older member's included"
    )

    client.zrem(a.key, older)  # the older member stops (as it leaves, or as the ttl drops it)
    a.beat(), b.beat()
    assert len(a.owned(SHARDS)) == len(b.owned(SHARDS)) == 8, "dealt in turn again"


def test_a_member_that_leaves_leaves_both_sets(client: redis.Redis, keys: Keys) -> None:
    a, b = _group(client, keys, "host:1:aa", "host:2:bb")

    b.leave()
    a.beat()

    assert a.members == ("host:1:aa",) and a.owned(SHARDS) == list(SHARDS)
    assert client.zrange(a.dealing_key, 0, -1) == [b"host:1:aa"]
