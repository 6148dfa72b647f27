"""AGENTLEDGER_REPLICA_ACKS on the cluster: an append waits until the slot's
replica holds it (read back from the replica itself), and a write asked to
reach more replicas than there are says so after its patience, retryably."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis
from clusterkit import LocalCluster
from itkit import TOOL_MODULE, create_run

from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.redis.replicas import NotReplicated, ReplicaAcks
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.keys import Keys
from agentledger.services.settings import Settings


def replica_of(cluster: LocalCluster, client: redis.Redis, key: str) -> redis.Redis:
    master = client.get_node_from_key(key)  # type: ignore[attr-defined]
    for node in cluster.nodes:
        info = node.client().info("replication")
        if info["role"] == "slave" and int(info["master_port"]) == master.port:
            replica = node.client()
            replica.execute_command("READONLY")
            return replica
    raise AssertionError(f"no replica of {master.port}")


def test_a_run_created_with_one_replica_ack_is_on_the_replica_when_it_returns(
    local_cluster: LocalCluster,
    client: redis.Redis,
    keys: Keys,
    settings: Settings,
    toolset: ToolSet,
    tools_dir: Path,
    workspace: Path,
) -> None:
    app = build_app(settings.with_(replica_acks=1), client, toolset)
    spec = RunSpec.model_validate({
        "task": "t", "tools": [TOOL_MODULE], "tool_path": [str(tools_dir)],
        "principal": {"id": "it", "tenant": "it"}, "model": {"scripted": [{"end_turn": "ok"}]},
    })  # fmt: skip
    for n in range(8):
        run_id = create_run(app, client, f"run-{n}.s{n}", spec, workspace)
        key = keys.run(run_id)
        assert replica_of(local_cluster, client, key).xlen(key) == 1  # no wait: it is there


def test_a_script_with_one_replica_ack_is_on_the_replica_when_it_returns(
    local_cluster: LocalCluster, client: redis.Redis, keys: Keys
) -> None:
    script = client.register_script("redis.call('SET', KEYS[1], ARGV[1]) return 1")
    acks = ReplicaAcks(client, 1)
    for i in range(20):
        key = f"{keys.prefix}:{{{i}}}:probe"
        assert acks.call(script, [key], [f"v{i}"]) == 1
        # no wait here: the reply came after the replica's acknowledgement
        assert replica_of(local_cluster, client, key).get(key) == f"v{i}".encode()


def test_more_replica_acks_than_replicas_wait_their_patience_then_say_so(
    client: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    script = client.register_script("redis.call('SET', KEYS[1], ARGV[1]) return 1")
    key = f"{keys.prefix}:{{0}}:probe"
    started = time.monotonic()
    assert ReplicaAcks(client, 2, timeout_ms=100, patience_s=0.3).call(script, [key], ["v"]) == 1
    assert time.monotonic() - started >= 0.3
    assert "reached 1 of 2 replica(s)" in caplog.text
    assert client.get(key) == b"v", "the write is on the master"
    strict = ReplicaAcks(client, 2, timeout_ms=100, patience_s=0.1, strict=True)
    with pytest.raises(NotReplicated) as caught:
        strict.call(script, [key], ["w"])
    assert caught.value.retryable and caught.value.acked == 1


def test_a_write_waits_while_its_replica_lags(
    local_cluster: LocalCluster, client: redis.Redis, keys: Keys
) -> None:
    script = client.register_script("redis.call('SET', KEYS[1], ARGV[1]) return 1")
    key = f"{keys.prefix}:{{5}}:probe"
    replica = replica_of(local_cluster, client, key)
    asleep = threading.Thread(target=lambda: replica.execute_command("DEBUG", "SLEEP", "0.6"))
    asleep.start()
    time.sleep(0.1)  # the replica is asleep for the next 0.5 s at least
    try:
        started = time.monotonic()
        ReplicaAcks(client, 1).call(script, [key], ["late"])
        waited = time.monotonic() - started
        without = time.monotonic()
        ReplicaAcks(client, 0).call(script, [f"{keys.prefix}:{{5}}:other"], ["x"])
        unwaited = time.monotonic() - without
    finally:
        asleep.join()
    assert waited >= 0.3, f"the write returned in {waited:.3f} s while its replica slept"
    assert unwaited < waited
    assert replica.get(key) == b"late"
