"""A master of the cluster killed under load (its own cluster: 3 masters, 3
replicas): with AGENTLEDGER_REPLICA_ACKS=1 every run completes and every write
ran once, writes of one stock record and of two (whose locks are in two of the
lock table's 8 partitions, on different masters) alike. The victim is the
master of the lock partition holding the two-record writes' leases. The time
the cluster took to recover and the runs to finish are printed. The killed
node is started again after the promotion, as an operator would: the promoted
master has no replica to acknowledge writes until then."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
from clusterkit import LocalCluster, Node, start_cluster
from e2ekit import Cli, copy_example, stop_workers
from redis.crc import key_slot
from test_cli_on_cluster import (
    MIXED_TOOLS,
    mixed_workload,
    start_workers_n,
    stock_of,
    submit,
    wait_all,
)

from agentledger.events.lock_partitions import final_partition
from agentledger.services.keys import keys_for
from agentledger.services.settings import Settings

RUNS = 12
KILL_AFTER = 4  # submitted runs before the kill: the rest go in while the slots move


@pytest.fixture
def doomed_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("failover"), masters=3, replicas=1)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_master_killed_under_load_loses_no_run_and_repeats_no_write(
    tmp_path: Path, make_cli: Callable[[Path], Cli], doomed_cluster: LocalCluster
) -> None:
    cli = make_cli(tmp_path)
    # the victim serves the lock partition where the two-record writes' leases are
    # (and B7's locks): its holders and waiters must survive the promotion
    victim = master_of(doomed_cluster, lock_table_key(cli, final_partition(MOVED, 8)))
    survivor = next(n for n in doomed_cluster.masters() if n is not victim)
    cli.env |= {"REDIS_URL": survivor.url, "AGENTLEDGER_REPLICA_ACKS": "1"}
    example = copy_example("inventory", tmp_path)
    workload = mixed_workload(example)
    plan = [workload[i % len(workload)] for i in range(RUNS)]
    workers = start_workers_n(cli, example, processes=2, tools=MIXED_TOOLS)
    try:
        run_ids = [submit(cli, spec) for spec, _ in plan[:KILL_AFTER]]
        victim.kill()
        killed_at = time.monotonic()
        with ThreadPoolExecutor(1) as watcher:
            promoted = watcher.submit(wait_promoted, survivor.client(), victim.port)
            run_ids += [submit_retrying(cli, spec) for spec, _ in plan[KILL_AFTER:]]
            recovered_s = promoted.result() - killed_at
        # the new master has no replica until the dead node comes back (as operators
        # bring it back): until then REPLICA_ACKS=1 holds that shard's writes back, retried
        victim.restart()
        finished = wait_all(cli, run_ids, timeout_s=120)
        done_s = time.monotonic() - killed_at
    finally:
        stop_workers(workers)
    print(f"\nfailover: killed :{victim.port} (lock partition {final_partition(MOVED, 8)}'s "
          f"master); cluster ok {recovered_s:.1f} s after the kill; {RUNS} runs done "
          f"{done_s:.1f} s after it")  # fmt: skip
    assert [(r, s) for r, s in finished.items() if s != "completed"] == []
    repeated = [(r, got) for r, (_, want) in zip(run_ids, plan, strict=True)
                if (got := stock_of(cli, r)) != want]  # fmt: skip
    print(f"failover: {len(repeated)} runs whose write ran twice or not at all")
    assert repeated == [], "a write ran twice (or not at all)"


MOVED = ("stock:A1", "stock:B7")  # the resources of the workload's `move_stock`


def lock_table_key(cli: Cli, partition: int) -> str:
    keys = keys_for(Settings(prefix=cli.env["AGENTLEDGER_PREFIX"], lock_partitions=8))
    return keys.locks(partition)[0]


def master_of(cluster: LocalCluster, key: str) -> Node:
    """The master serving the key's slot."""
    slot = key_slot(key.encode())
    for row in cluster.masters()[0].client().execute_command("CLUSTER", "SLOTS"):
        if row[0] <= slot <= row[1]:
            return next(n for n in cluster.nodes if n.port == row[2][1])
    raise AssertionError(f"no master serves slot {slot}")


def submit_retrying(cli: Cli, spec: Path, timeout_s: float = 30.0) -> str:
    """`submit` while the slots move may be refused for a moment: a user tries again."""
    publisher = cli.publisher()
    deadline = time.monotonic() + timeout_s
    while True:
        done = cli("submit", "--as", publisher, spec)
        if done.returncode == 0:
            return done.stdout.strip()
        assert "Traceback" not in done.stderr, done.stderr
        if time.monotonic() > deadline:
            return submit(cli, spec)
        time.sleep(0.2)


def promote_then_restart(client: redis.Redis, victim: Node) -> float:
    """The time a replica took the dead master's slots over; then the dead node is
    started again, as an operator would, and rejoins as the new master's replica
    (until then REPLICA_ACKS=1 holds that shard's writes back: they wait, retried)."""
    at = wait_promoted(client, victim.port)
    victim.restart()
    return at


def wait_promoted(client: redis.Redis, victim_port: int, timeout_s: float = 30.0) -> float:
    """When a replica serves the dead master's slots and the cluster says ok."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        masters = {row[2][1] for row in client.execute_command("CLUSTER", "SLOTS")}
        if victim_port not in masters and client.cluster("info").get("cluster_state") == "ok":
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError("the cluster did not recover")
