"""The worker handlers driven directly (no broker) against a real Redis: a tool
runs once however often its dispatch is delivered, racing workers all get
their claims and outcomes recorded, and a write that times out is never taken
for a failure. Executions are counted by the tools themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis
from itkit import (
    Race,
    call,
    create_run,
    drive,
    event_types,
    executions,
    in_threads,
    load,
    proposed,
    racing_workers,
    scripted_spec,
)

from agentledger.events.status import CallStatus, RunStatus
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import handle_drive_call


def running_tools(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path, *calls: dict[str, Any]
) -> str:
    """A run whose first turn proposed `calls`, which nobody has taken yet."""
    spec = scripted_spec([{"tool_use": list(calls)}, {"end_turn": "done"}], tools_dir=tools_dir)
    run_id = create_run(app, client, "run-h", spec, workspace)
    state = drive(app, run_id, until=proposed)
    assert [c.status for c in state.current_turn.calls] == [CallStatus.PROPOSED] * len(calls)
    return run_id


def test_a_redelivered_drive_call_runs_the_tool_once(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = running_tools(
        app,
        client,
        tools_dir,
        workspace,
        call("c1", "it_write", key="a", value="1"),
        call("c2", "it_write", key="b", value="2"),
    )

    handle_drive_call(app, run_id, "c1")
    seq = load(app, run_id).seq
    handle_drive_call(app, run_id, "c1")  # the broker delivered it again

    state = load(app, run_id)
    assert state.seq == seq
    assert state.call("c1").status is CallStatus.SUCCEEDED
    assert executions(workspace) == {"c1": 1}
    assert event_types(app.store, run_id).count("ToolCallStarted") == 1


def test_one_dispatch_delivered_to_two_workers_at_once_runs_the_tool_once(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = running_tools(
        app, client, tools_dir, workspace, call("c1", "it_write", key="a", value="1", delay_s=0.2)
    )
    race = Race({"ToolCallStarted": 2})  # both fold before either claims
    one, other = racing_workers(app, race)

    in_threads(
        lambda: handle_drive_call(one, run_id, "c1"),
        lambda: handle_drive_call(other, run_id, "c1"),
    )

    state = load(app, run_id)
    assert race.conflicts == 1
    assert executions(workspace) == {"c1": 1}
    assert state.turns[0].calls[0].status is CallStatus.SUCCEEDED
    assert state.status is RunStatus.REQUESTING_MODEL
    assert event_types(app.store, run_id).count("ToolCallStarted") == 1


def test_two_parallel_calls_of_a_turn_are_both_claimed_and_recorded_despite_conflicts(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    run_id = running_tools(
        app,
        client,
        tools_dir,
        workspace,
        call("c1", "it_write", key="a", value="1", delay_s=0.2),
        call("c2", "it_read", key="b", delay_s=0.2),
    )
    # Both workers fold the same seq before claiming, and again before recording:
    # one of each pair loses the optimistic race and must reload and append again (the
    # claim's loser may then meet the other's reloaded outcome: a third conflict).
    race = Race({"ToolCallStarted": 2, "ToolCallSucceeded": 2})
    one, other = racing_workers(app, race)

    in_threads(
        lambda: handle_drive_call(one, run_id, "c1"),
        lambda: handle_drive_call(other, run_id, "c2"),
    )

    state = load(app, run_id)
    calls = state.turns[0].calls
    assert race.conflicts >= 2
    assert [c.status for c in calls] == [CallStatus.SUCCEEDED, CallStatus.SUCCEEDED]
    assert [c.attempts for c in calls] == [1, 1]
    assert executions(workspace) == {"c1": 1, "c2": 1}
    assert state.status is RunStatus.REQUESTING_MODEL


def test_a_write_that_times_out_ends_as_outcome_unknown_and_waits_for_a_human(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_stuck_write", key="a")]}, {"end_turn": "done"}],
        tools_dir=tools_dir,
    )
    run_id = create_run(app, client, "run-stuck", spec, workspace)

    state = drive(app, run_id)

    types = event_types(app.store, run_id)
    assert state.status is RunStatus.AWAITING_HUMAN
    assert state.call("c1").status is CallStatus.OUTCOME_UNKNOWN
    assert types[-2:] == ["ToolCallOutcomeUnknown", "RunEscalated"]
    assert "ToolCallFailed" not in types and "RunFailed" not in types
    assert "timed out" in state.detail
    assert executions(workspace) == {"c1": 1}
    assert run_id not in app.store.idle_live_runs(idle_since=app.clock.now() + 3600)


def test_a_late_redelivery_of_a_write_whose_outcome_is_unknown_does_not_run_it_again(
    app: App, client: redis.Redis, tools_dir: Path, workspace: Path
) -> None:
    spec = scripted_spec(
        [{"tool_use": [call("c1", "it_stuck_write", key="a")]}], tools_dir=tools_dir
    )
    run_id = create_run(app, client, "run-stuck", spec, workspace)
    state = drive(app, run_id)

    handle_drive_call(app, run_id, "c1")

    assert load(app, run_id).seq == state.seq
    assert executions(workspace) == {"c1": 1}
