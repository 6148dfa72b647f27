"""The lock table in partitions on a real Redis, through the handlers and the
sweeper: a call over two partitions holds its first part while it waits on the
second; when the process that let it through dies before sending it on, the
sweeper's re-ask of the waiting run sends it on and the call runs; a partial hold
left by a release that died halfway is sent on by an expiry pass and ends with its
lease; the partition count is recorded once and a process asking for another
refuses to start; round trips per call by partitions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis
from itkit import (
    OffsetClock,
    call,
    capturing,
    create_run,
    drive,
    executions,
    load,
    proposed,
    queued,
    scripted_spec,
)

from agentledger.events.commands import DriveCall
from agentledger.events.counted import counted
from agentledger.events.lock_partitions import partition_of
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.events.status import CallStatus
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.adapters.redis.client import is_cluster
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import handle_drive_call
from agentledger.services.keys import Keys
from agentledger.services.lock_partitions import ON_A_CLUSTER, ON_ONE_REDIS, lock_partitions
from agentledger.services.loops.sweeper import sweep_once
from agentledger.services.settings import Settings

N = 3
W = Mode.WRITE


def two_partitions(n: int = N) -> tuple[str, str]:
    """Two kv keys (of the test tools) in partitions low < high."""
    names = [f"k{i}" for i in range(100)]
    return next(
        (a, b)
        for a in names
        for b in names
        if partition_of(f"kv:{a}", n) < partition_of(f"kv:{b}", n)
    )


@pytest.fixture
def app(settings: Settings, client: redis.Redis, toolset: ToolSet) -> App:
    return build_app(settings.with_(lock_partitions=N, lock_lease_s=0.4), client, toolset)


def locks_of(app: App) -> RedisLocks:
    assert isinstance(app.locks, RedisLocks) and app.locks.partitions == N
    return app.locks


def test_a_part_its_sender_died_before_sending_on_is_sent_on_by_the_sweepers_re_ask(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    low, high = two_partitions()
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_write_two", key=low, other=high, value="1")]},
         {"end_turn": "done"}],
        tools_dir=tools_dir,
    )  # fmt: skip
    run_id = create_run(app, client, "run-p", spec, workspace)
    blocker = LockAsk("other", "b", "other/b/1.0", {f"kv:{low}": W})
    assert app.locks.enqueue([blocker], [None]).grants
    drive(app, run_id, until=proposed)
    handle_drive_call(app, run_id, "c1")
    assert load(app, run_id).call("c1").status is CallStatus.WAITING
    queued(app, client, run_id)

    # the blocker's process releases in the low partition only, and dies: the script
    # gave c1 its low part (a partial hold) but nobody sent the high part on
    p = partition_of(f"kv:{low}", N)
    locks_of(app)._call(p, "release", json.dumps([blocker.request_id]), None)
    leases = Keys(app.settings.prefix, 1, lock_partitions=N).locks(p)[4]
    [(rid, score)] = client.zrange(leases, 0, -1, withscores=True)
    assert score == float("inf"), "a partial hold, without a lease"
    time.sleep(0.5)  # longer than the lock lease: a partial hold does not expire
    assert app.locks.expire().expired == []
    assert load(app, run_id).call("c1").status is CallStatus.WAITING

    later, sent = capturing(app, OffsetClock(60))
    sweep_once(later, list(range(app.settings.shards)))  # the waiting run is idle: re-asked
    assert DriveCall(run_id, "c1") in sent + queued(app, client, run_id)
    handle_drive_call(app, run_id, "c1")  # its locks asked again: the part goes on, it runs
    c1 = load(app, run_id).call("c1")
    assert c1.status is CallStatus.SUCCEEDED
    assert set(c1.tokens or {}) == {f"kv:{low}", f"kv:{high}"}, "it ran holding both"
    state = drive(app, run_id)
    assert state.status.terminal and executions(workspace) == {"c1": 1}


def test_a_partial_hold_a_dying_release_left_behind_is_sent_on_and_ends_with_its_lease(
    client: redis.Redis, prefix: str
) -> None:
    locks = RedisLocks(client, Keys(prefix, 1, lock_partitions=N), lease_s=0.3)
    low, high = (f"kv:{k}" for k in two_partitions())
    locks.enqueue([LockAsk("b", "b", "b/b/1", {high: W})], [None])
    wide = LockAsk("dead", "c", "dead/c/1", {low: W, high: W})
    assert locks.enqueue([wide], [None]).grants == []  # holds low, waits on high
    # its run ended; the release dropped the high part and died before the low one
    locks._call(partition_of(high, N), "release", json.dumps([wide.request_id]), None)
    late = LockAsk("late", "c", "late/c/1", {low: W})
    assert locks.enqueue([late], [None]).grants == []  # the orphan holds low
    locks.release([LockAsk("b", "b", "b/b/1", {high: W})])
    reply = locks.expire()  # sends the orphan on: granted in full, nobody renews it
    assert reply.grants == [] or [g.holder.request_id for g in reply.grants] == ["dead/c/1"]
    deadline = time.monotonic() + 5
    got: list[str] = []
    while not got and time.monotonic() < deadline:
        time.sleep(0.1)
        got = [g.holder.request_id for g in locks.expire().grants]
    assert got == ["late/c/1"], "the orphan's lease ended it in every partition"


def test_the_partition_count_is_recorded_once_and_another_one_refuses_to_start(
    client: redis.Redis, prefix: str
) -> None:
    keys = Keys(prefix, 1)
    default = ON_A_CLUSTER if is_cluster(client) else ON_ONE_REDIS
    assert lock_partitions(client, keys, Settings(prefix=prefix)) == default  # recorded
    assert (
        lock_partitions(client, keys, Settings(prefix=prefix, lock_partitions=default)) == default
    )
    with pytest.raises(ConfigError) as refused:
        lock_partitions(client, keys, Settings(prefix=prefix, lock_partitions=5))
    assert refused.value.name == "AGENTLEDGER_LOCK_PARTITIONS"
    assert counted(default, "partition") in str(refused.value) and "asks for 5" in str(
        refused.value
    )
    other = Keys(f"{prefix}:b", 1)
    assert lock_partitions(client, other, Settings(prefix=f"{prefix}:b", lock_partitions=5)) == 5
    assert lock_partitions(client, other, Settings(prefix=f"{prefix}:b")) == 5  # unset: recorded


@pytest.mark.parametrize("n", [1, 2])
def test_round_trips_of_a_call_by_partitions(client: redis.Redis, prefix: str, n: int) -> None:
    """A call over two resources: one script call per partition it spans, to ask,
    to release; one to renew (its lease is in its last partition)."""
    locks = RedisLocks(client, Keys(prefix, 1, lock_partitions=n), lease_s=5.0)
    low, high = (f"kv:{k}" for k in two_partitions(2))
    ask = LockAsk("r", "c", "r/c/1", {low: W, high: W})
    counts = []
    for op in (
        lambda: locks.enqueue([ask], [None]),
        lambda: locks.renew(ask),
        lambda: locks.release([ask]),
        lambda: locks.expire(),
    ):
        before = locks.calls
        op()
        counts.append(locks.calls - before)
    print(f"\n{n} partition(s): enqueue, renew, release, expire = {counts} script calls")
    assert counts == [n, 1, n, n]
