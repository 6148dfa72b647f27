"""The sweeper against a real Redis: it expires claims whose worker went silent
past the deadline (a read is tried again, a write goes to a human) and
re-drives idle runs from the event log alone. Time moves with an offset clock."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from itkit import (
    OffsetClock,
    call,
    create_run,
    drive,
    event_types,
    executions,
    scheduled,
    scripted_spec,
)

from events.commands import Command, RequestModel, ScheduleCalls
from events.status import CallStatus, RunStatus
from events.tool_step import claim_call
from services.handlers.app import App
from services.handlers.execute import handle_execute_call
from services.handlers.schedule import handle_schedule_calls
from services.handlers.steps import load, run_step
from services.keys import Keys
from services.loops.sweeper import sweep_once


def claimed_by_a_dead_worker(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path, tool_call: dict[str, Any]
) -> str:
    """A run whose only call was claimed by a worker that died before running it."""
    spec = scripted_spec([{"tool_use": [tool_call]}, {"end_turn": "done"}], tools_dir=tools_dir)
    run_id = create_run(app, client, "run-s", spec, workspace)
    drive(app, run_id, until=scheduled)
    run_step(
        app.store,
        app.clock,
        run_id,
        lambda s: claim_call(s, tool_call["id"], worker="dead:1", now=app.clock.now()),
        source="tools",
    )
    assert load(app.store, run_id).call(tool_call["id"]).status is CallStatus.STARTED
    return run_id


def test_an_expired_read_claim_becomes_unknown_and_is_dispatched_again(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = claimed_by_a_dead_worker(
        app, client, tools_dir, workspace, call("c1", "it_read", key="a")
    )
    sent: list[Command] = []

    assert sweep_once(replace(app, clock=OffsetClock(60)), sent.append) == 1

    # the dead holder's lock lease ran out too; the retry asks for the lock again
    assert event_types(app.store, run_id)[-2:] == ["ToolCallLeaseExpired", "ToolCallOutcomeUnknown"]
    assert sent == [ScheduleCalls(run_id)]
    handle_schedule_calls(app, run_id)
    handle_execute_call(app, run_id, "c1")
    call_ = load(app.store, run_id).turns[0].calls[0]
    assert (call_.status, call_.attempts) == (CallStatus.SUCCEEDED, 2)
    assert executions(workspace) == {"c1": 1}  # the dead worker never ran it


def test_an_expired_write_claim_sends_the_run_to_a_human_and_is_never_retried(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = claimed_by_a_dead_worker(
        app, client, tools_dir, workspace, call("c1", "it_write", key="a", value="1")
    )
    sent: list[Command] = []

    sweep_once(replace(app, clock=OffsetClock(60)), sent.append)

    state = load(app.store, run_id)
    assert event_types(app.store, run_id)[-2:] == ["ToolCallOutcomeUnknown", "RunEscalated"]
    assert state.status is RunStatus.AWAITING_HUMAN
    assert state.call("c1").status is CallStatus.OUTCOME_UNKNOWN
    assert sent == []
    handle_execute_call(app, run_id, "c1")  # a late redelivery of the original dispatch
    assert executions(workspace) == {}
    assert load(app.store, run_id).seq == state.seq


def test_a_claim_within_its_deadline_is_left_alone(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = claimed_by_a_dead_worker(
        app, client, tools_dir, workspace, call("c1", "it_read", key="a")
    )
    seq = load(app.store, run_id).seq
    sent: list[Command] = []

    # past the run's idle lease (2 s), well within the claim's deadline (30 s + grace)
    assert sweep_once(replace(app, clock=OffsetClock(10)), sent.append) == 0

    # the silent holder's lock lease (5 s) ran out and is recorded; the claim stands
    assert event_types(app.store, run_id)[seq:] == ["ToolCallLeaseExpired"]
    assert load(app.store, run_id).call("c1").status is CallStatus.STARTED
    assert sent == []


def test_an_idle_run_is_re_driven_from_its_log_alone(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec([{"end_turn": "done"}], tools_dir=tools_dir)
    run_id = create_run(app, client, "run-idle", spec, workspace)
    sent: list[Command] = []

    assert sweep_once(app, sent.append) == 0  # not idle yet
    assert sweep_once(replace(app, clock=OffsetClock(60)), sent.append) == 1

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
    sent: list[Command] = []

    sweep_once(replace(app, clock=OffsetClock(60)), sent.append)

    assert sent == [RequestModel(healthy)]
