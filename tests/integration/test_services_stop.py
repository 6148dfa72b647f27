"""A process that stops cleanly leaves every group it was a member of: the
intakes and sweepers still running take its inbox partitions and shards at
their next beat, not `member_ttl_s` later (the next `agentledger run` on the
prefix would wait that long for its request to be taken)."""

from __future__ import annotations

import time

import redis
from itkit import QUEUE

from services.adapters.tools.toolset import ToolSet
from services.bootstrap import build_services
from services.keys import Keys
from services.settings import Settings

GROUPS = ("intake", "sweep")


def members(client: redis.Redis, key: str) -> set[str]:
    return {m.decode() for m in client.zrange(key, 0, -1)}


def test_a_stopped_process_is_no_member_of_the_intakes_or_sweepers(
    settings: Settings, client: redis.Redis, keys: Keys, toolset: ToolSet
) -> None:
    settings = settings.with_(sweep_interval_s=0.1)  # the sweeper beats at once
    services = build_services(settings, client, toolset, queue=QUEUE)
    me = services.broker.worker_id
    services.start()
    try:  # both loops have said they are alive
        deadline = time.monotonic() + 30
        while not all(me in members(client, keys.members(g)) for g in GROUPS):
            assert time.monotonic() < deadline, "the loops never beat"
            time.sleep(0.05)
    finally:
        services.stop()
    for group in GROUPS:
        assert me not in members(client, keys.members(group)), group
