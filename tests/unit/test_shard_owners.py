"""Which live member owns a shard (`membership.owner`): one owner per shard, the
same whoever asks and whatever shards it knows of, and an even split."""

from __future__ import annotations

from collections import Counter

import pytest

from services.adapters.broker.membership import owner

HOSTS = [f"host-{i}-{pid}" for i, pid in enumerate((4711, 93, 12, 5550, 300, 8))]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("shards", [16, 64, 7])
def test_a_pools_shards_split_evenly_between_its_processes(n: int, shards: int) -> None:
    members = HOSTS[:n]
    owned = Counter(owner(s, members) for s in range(shards))

    assert set(owned) == set(members) if shards >= n else set(owned) <= set(members)
    assert max(owned.values()) - min(owned.values()) <= 1


def test_every_member_computes_the_same_owner_whatever_it_knows() -> None:
    members = HOSTS[:4]
    for shard in range(64):
        seen = {owner(shard, order) for order in (members, members[::-1], [*members, members[0]])}
        assert len(seen) == 1, f"shard {shard}: {seen}"


def test_no_members_own_nothing() -> None:
    assert owner(3, []) is None
