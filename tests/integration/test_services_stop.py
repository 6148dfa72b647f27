"""A process that stops cleanly leaves every group it was a member of: the
sweepers still running take its shards at their next beat, and the intakes its
inbox partitions, not `member_ttl_s` later (the next `agentledger run` on the
prefix would wait that long for its request to be taken). Its deliveries under
way stop carrying runs on, as they do when it moves to another tool set."""

from __future__ import annotations

import time
from pathlib import Path

import redis
from itkit import QUEUE

from agentledger.events.commands import Pool
from agentledger.services.adapters.tools.toolset import ToolSet, load_toolset
from agentledger.services.bootstrap import build_services
from agentledger.services.intake_role import build_intake
from agentledger.services.keys import Keys
from agentledger.services.settings import Settings


def members(client: redis.Redis, key: str) -> set[str]:
    return {m.decode() for m in client.zrange(key, 0, -1)}


def until_member(client: redis.Redis, key: str, me: str) -> None:
    deadline = time.monotonic() + 30
    while me not in members(client, key):
        assert time.monotonic() < deadline, "the loop never beat"
        time.sleep(0.05)


def test_a_stopped_worker_process_is_no_sweeper_and_never_was_an_intake(
    settings: Settings, client: redis.Redis, keys: Keys, toolset: ToolSet
) -> None:
    settings = settings.with_(sweep_interval_s=0.1)  # the sweeper beats at once
    services = build_services(settings, client, toolset, queue=QUEUE)
    me = services.broker.worker_id
    services.start()
    try:
        until_member(client, keys.members("sweep"), me)
        assert [t.name for t in services.threads] == ["agentledger-sweeper"]  # no intake here
        assert client.zcard(keys.intake_members()) == 0
    finally:
        services.stop()
    assert me not in members(client, keys.members("sweep"))


def test_a_stopped_intake_is_no_member_of_the_intakes(
    settings: Settings, client: redis.Redis, keys: Keys
) -> None:
    service = build_intake(settings, client, worker="intake-1").start()
    try:
        until_member(client, keys.intake_members(), "intake-1")
        assert service.problem() is None and service.unready() is None
    finally:
        service.stop()
    assert "intake-1" not in members(client, keys.intake_members())
    assert service.problem() == "stopping"


def test_stopping_or_changing_tool_sets_ends_carrying_for_the_deliveries_under_way(
    settings: Settings, client: redis.Redis, toolset: ToolSet, tools_dir: Path
) -> None:
    services = build_services(settings, client, toolset, queue=QUEUE)
    first = services.app.carrying
    assert first is not None and first.queue == QUEUE and set(first.pools) == set(Pool)
    services.start(loops=False)
    try:
        builtin_only = load_toolset([], [])  # another fingerprint: the pools move to it
        assert builtin_only.fingerprint != toolset.fingerprint
        services.retool(builtin_only)

        now = services.app.carrying
        assert first.stopping.is_set(), "deliveries of the old tool set carry nothing more"
        assert now is not None and not now.stopping.is_set()
        assert (now.queue, now.pools, now.for_s) == (first.queue, first.pools, first.for_s)
    finally:
        services.stop()
    assert now.stopping.is_set()
