"""The sweeper against a real Redis: it expires claims whose worker went silent
past the deadline (a read is tried again, a write goes to a human), ends the
lock leases of holders that stopped renewing (recording nothing for a run that
ended), and re-drives idle runs from the event log alone. Run time moves with
an offset clock; lock leases are Redis's own time, so they are short here."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis
from itkit import (
    OffsetClock,
    call,
    capturing,
    claim_without_running,
    create_run,
    drive,
    event_types,
    executions,
    load,
    proposed,
    queued,
    scripted_spec,
)

from agentledger.events.commands import DriveCall, RequestModel
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.events.status import CallStatus, RunStatus
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import handle_drive_call
from agentledger.services.keys import Keys
from agentledger.services.loops.sweeper import sweep_once
from agentledger.services.settings import Settings

LOCK_LEASE_S = 0.4


@pytest.fixture
def app(settings: Settings, client: redis.Redis, toolset: ToolSet) -> App:
    return build_app(settings.with_(lock_lease_s=LOCK_LEASE_S), client, toolset)


def shards(app: App) -> list[int]:
    return list(range(app.settings.shards))


def claimed_by_a_dead_worker(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path, tool_call: dict[str, Any]
) -> str:
    """A run whose only call was claimed by a worker that died before running it."""
    spec = scripted_spec([{"tool_use": [tool_call]}, {"end_turn": "done"}], tools_dir=tools_dir)
    run_id = create_run(app, client, "run-s", spec, workspace)
    drive(app, run_id, until=proposed)
    state = claim_without_running(app, run_id, tool_call["id"], worker="dead:1")
    assert state.call(tool_call["id"]).status is CallStatus.STARTED
    queued(app, client, run_id)  # what was sent so far, taken away
    return run_id


def test_an_expired_read_claim_becomes_unknown_and_is_dispatched_again(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = claimed_by_a_dead_worker(
        app, client, tools_dir, workspace, call("c1", "it_read", key="a")
    )
    time.sleep(LOCK_LEASE_S + 0.1)  # nobody renews the dead holder's lock
    later, sent = capturing(app, OffsetClock(60))

    assert sweep_once(later, shards(app)) == 1

    # the dead holder's lock lease ran out too; the retry asks for the lock again
    assert event_types(app.store, run_id)[-2:] == ["ToolCallLeaseExpired", "ToolCallOutcomeUnknown"]
    assert sent + queued(app, client, run_id) == [DriveCall(run_id, "c1")]
    handle_drive_call(app, run_id, "c1")
    call_ = load(app, run_id).turns[0].calls[0]
    assert (call_.status, call_.attempts) == (CallStatus.SUCCEEDED, 2)
    assert executions(workspace) == {"c1": 1}  # the dead worker never ran it


def test_an_expired_write_claim_sends_the_run_to_a_human_and_is_never_retried(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = claimed_by_a_dead_worker(
        app, client, tools_dir, workspace, call("c1", "it_write", key="a", value="1")
    )
    later, sent = capturing(app, OffsetClock(60))

    sweep_once(later, shards(app))

    state = load(app, run_id)
    assert event_types(app.store, run_id)[-2:] == ["ToolCallOutcomeUnknown", "RunEscalated"]
    assert state.status is RunStatus.AWAITING_HUMAN
    assert state.call("c1").status is CallStatus.OUTCOME_UNKNOWN
    assert sent + queued(app, client, run_id) == []
    handle_drive_call(app, run_id, "c1")  # a late redelivery of the original command
    assert executions(workspace) == {}
    assert load(app, run_id).seq == state.seq


def test_a_claim_within_its_deadline_is_left_alone(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = claimed_by_a_dead_worker(
        app, client, tools_dir, workspace, call("c1", "it_read", key="a")
    )
    time.sleep(LOCK_LEASE_S + 0.1)
    seq = load(app, run_id).seq
    later, sent = capturing(app, OffsetClock(10))

    # past the run's idle lease (2 s), well within the claim's deadline (30 s + grace)
    assert sweep_once(later, shards(app)) == 0

    # the silent holder's lock lease ran out and is recorded; the claim stands
    assert event_types(app.store, run_id)[seq:] == ["ToolCallLeaseExpired"]
    assert load(app, run_id).call("c1").status is CallStatus.STARTED
    assert sent + queued(app, client, run_id) == []


def test_an_idle_run_is_re_driven_from_its_log_alone(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    run_id = create_run(app, client, "run-idle", spec, workspace)
    assert queued(app, client, run_id) == [RequestModel(run_id)]  # sent with its creation: lost
    now, sent_now = capturing(app)
    later, sent_later = capturing(app, OffsetClock(60))

    assert sweep_once(now, shards(app)) == 0  # not idle yet
    assert sweep_once(later, shards(app)) == 1

    assert (sent_now, sent_later) == ([], [RequestModel(run_id)])


def test_a_sweeper_looks_only_at_the_shards_it_owns(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    run_id = create_run(app, client, "run-idle.s3", spec, workspace)
    queued(app, client, run_id)
    later, sent = capturing(app, OffsetClock(60))

    assert sweep_once(later, [0, 1, 2]) == 0
    assert sweep_once(later, [3]) == 1
    assert sent == [RequestModel(run_id)]


def test_a_run_whose_log_cannot_be_read_does_not_stop_the_sweep_of_the_others(
    app: App, client: redis.Redis, keys: Keys, tools_dir: Path, workspace: Path
) -> None:
    healthy = create_run(
        app, client, "run-ok", scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir), workspace
    )
    for broken in ("run-garbage-1", "run-garbage-2", "run-garbage-3"):
        client.xadd(keys.run(broken), {"id": "x", "type": "RunCreated", "e": b"\xc1"}, id="0-1")
        client.zadd(keys.live(keys.shard(broken)), {broken: 0})
    later, sent = capturing(app, OffsetClock(60))

    sweep_once(later, shards(app))

    assert sent == [RequestModel(healthy)]


def test_a_lock_lease_that_ends_on_a_run_that_timed_out_is_a_no_op_and_passes_the_lock_on(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_write", key="k", value="1")]}, {"end_turn": "done"}],
        tools_dir=tools_dir,
    )
    spec = spec.model_copy(
        update={"budgets": spec.budgets.model_copy(update={"max_wall_clock_s": 5})}
    )
    run_id = create_run(app, client, "run-t", spec, workspace)
    drive(app, run_id, until=proposed)
    claim_without_running(app, run_id, "c1", worker="dead:1")
    later, sent = capturing(app, OffsetClock(60))
    sweep_once(later, shards(app))  # the wall clock ran out: the run ends, its claim stands
    assert load(app, run_id).status is RunStatus.TIMEOUT
    time.sleep(LOCK_LEASE_S + 0.1)
    seq = load(app, run_id).seq

    sweep_once(later, shards(app))  # no exception, nothing recorded for the ended run

    assert load(app, run_id).seq == seq
    ask = LockAsk("x", "c9", "x/c9/1", {"kv:k": Mode.WRITE})
    assert app.locks.enqueue([ask], [None]).grants, "the lock went on"


def test_a_run_that_times_out_holding_a_granted_lock_lets_the_next_waiter_in_at_once(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec(
        [{"tool_use": [call("c0", "it_read", key="z"), call("c1", "it_write", key="k", value="1")]},
         {"end_turn": "done"}],
        tools_dir=tools_dir,
    )  # fmt: skip
    budgets = spec.budgets.model_copy(update={"max_wall_clock_s": 5, "max_parallel_calls": 1})
    run_id = create_run(
        app, client, "run-t", spec.model_copy(update={"budgets": budgets}), workspace
    )
    drive(app, run_id, until=proposed)
    held = claim_without_running(app, run_id, "c0", worker="dead:1")
    assert held.call("c1").status is CallStatus.SCHEDULED  # granted; no room to run yet
    notice = app.outbox.message(held, DriveCall("other-run", "c9"))
    waiter = LockAsk("other-run", "c9", "other-run/c9/1.0", {"kv:k": Mode.WRITE})
    assert app.locks.enqueue([waiter], [notice]).grants == []
    later, sent = capturing(app, OffsetClock(60))

    sweep_once(later, shards(app))  # the wall clock ran out

    assert load(app, run_id).status is RunStatus.TIMEOUT
    assert DriveCall("other-run", "c9") in sent, "the waiter was told in the same step"
    assert app.locks.enqueue([waiter], [None]).grants, "and holds the lock"
