"""The partitioned lock table on the cluster: the sweeper's re-ask sends on a part
whose sender died, an orphan partial hold ends with its lease, the count is
recorded once, round trips by partitions (the suite of
test_partitioned_locks_on_redis.py); the default 8 partitions are 8 slots
spread over the cluster's masters, each partition's script on one slot; a table
from before the count was recorded keeps 1."""

import redis
from test_partitioned_locks_on_redis import *  # noqa: F403

from agentledger.services.keys import Keys
from agentledger.services.lock_partitions import ON_A_CLUSTER, lock_partitions
from agentledger.services.settings import Settings


def test_a_cluster_gets_8_partitions_by_default_spread_over_its_masters(
    client: redis.Redis, prefix: str
) -> None:
    n = lock_partitions(client, Keys(prefix, 1), Settings(prefix=prefix))
    assert n == ON_A_CLUSTER == 8
    keys = Keys(prefix, 1, lock_partitions=n)
    nodes = set()
    for p in range(n):
        slots = {client.keyslot(k) for k in keys.locks(p)}  # type: ignore[attr-defined]
        assert len(slots) == 1, "a partition is one slot"
        nodes.add(client.nodes_manager.get_node_from_slot(slots.pop()).name)  # type: ignore[attr-defined]
    print(f"\n{n} lock partitions on {len(nodes)} masters")
    assert len(nodes) > 1


def test_a_lock_table_in_use_before_the_count_was_recorded_keeps_one_partition(
    client: redis.Redis, prefix: str
) -> None:
    """An upgrade: its holders are all under {lk0}; 8 partitions would split them."""
    keys = Keys(prefix, 1)
    client.hset(keys.locks(0)[3], "kv:a", 1)  # the tokens of a table that granted locks
    assert lock_partitions(client, keys, Settings(prefix=prefix)) == 1
