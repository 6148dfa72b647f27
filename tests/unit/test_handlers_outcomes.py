"""Outcomes that come late or are stopped, through the handlers and the in-memory
store, lock table and ledger: a write whose claim ran out is unknown (never
taken for not done) and its late result moves the run on by itself; a running
call of a cancelled run is told to stop and the run ends cancelled with it; a
write runs at most once per operation key, across runs too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unit_tools
from handlerkit import Unit, call, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import DriveCall, RequestModel, ResolveCall
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import RunCancelled, ToolCallFailed, ToolCallSucceeded
from agentledger.services.handlers.engine import Decided
from agentledger.services.loops.sweeper import sweep_once

DONE = {"end_turn": "done"}


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws", lock_lease_s=600.0)


def ready(unit: Unit, run_id: str, *calls: dict[str, Any]) -> None:
    unit.create(run_id, spec({"tool_use": list(calls)}, DONE))
    unit.deliver(RequestModel(run_id))
    unit.take()


def unknown_while_running(unit: Unit) -> None:
    """run-a's write a1 runs (held at its gate) past its claim's deadline; the sweeper
    finds the claim ran out."""
    deadline = unit.call_of("run-a", "a1").claim_deadline
    assert deadline is not None, "a1 is claimed"
    unit.clock.advance(deadline - unit.clock.now() + 0.001)
    sweep_once(unit.app, [0])


def test_a_write_whose_claim_ran_out_is_unknown_and_its_late_result_moves_the_run_on(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "kv_write", key="k", value="1", at="a1"))
    running = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")

    unknown_while_running(unit)

    assert unit.appends_to("run-a")[-1] == ("ToolCallOutcomeUnknown", "RunEscalated")
    state = unit.state("run-a")
    assert (state.status, state.escalated_for) == (RunStatus.AWAITING_HUMAN, "outcome_unknown")
    assert unit.take() == [], "a write of unknown outcome is never dispatched again"
    unit_tools.gate("a1").set()
    running.join()
    late = unit.store.appends[-1]
    assert (late.types, late.queued) == (
        ("ToolCallSucceeded", "RunResumed"),
        (RequestModel("run-a"),),
    )
    succeeded = unit.memory.read("run-a")[-2].data
    assert isinstance(succeeded, ToolCallSucceeded) and succeeded.resolved_by == "late_outcome"
    assert unit.state("run-a").status is RunStatus.REQUESTING_MODEL
    assert unit_tools.RAN == {"a1": 1}


def test_a_drive_call_of_a_write_of_unknown_outcome_delivered_late_does_not_run_it_again(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "kv_write", key="k", value="1", at="a1"))
    running = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    unknown_while_running(unit)
    seq = unit.state("run-a").seq

    unit.deliver(DriveCall("run-a", "a1"))

    assert unit.state("run-a").seq == seq
    assert unit_tools.RAN == {"a1": 1}
    unit_tools.gate("a1").set()
    running.join()


def test_a_running_call_of_a_cancelled_run_is_told_to_stop_and_the_run_ends_with_it(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "kv_slow_write", key="k"))
    running = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")

    unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))
    )
    unit.clock.advance(1.0)  # the call's watch on its run looks again
    running.join()

    assert unit.store.conflicts == 1, "the outcome was decided again on the cancelled run"

    assert unit.appends_to("run-a")[-2:] == [
        ("RunCancelRequested",),
        ("ToolCallCancelled", "RunCancelled"),
    ]
    cancelled = unit.memory.read("run-a")[-1].data
    assert isinstance(cancelled, RunCancelled) and cancelled.by == "alice"
    assert "kv_slow_write(a1) cancelled" in cancelled.side_effects
    assert unit.state("run-a").status is RunStatus.CANCELLED
    assert unit.store.appends[-1].queued == ()


def test_a_cancel_between_steps_ends_the_run_at_once_and_nothing_more_runs(unit: Unit) -> None:
    ready(unit, "run-a", call("a1", "kv_write", key="k", value="1"))

    unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))
    )
    unit.deliver(DriveCall("run-a", "a1"))  # dispatched before the cancel

    assert unit.appends_to("run-a")[-1] == ("RunCancelRequested", "RunCancelled")
    assert unit.state("run-a").status is RunStatus.CANCELLED
    assert unit_tools.RAN == {}


def test_the_same_business_key_from_two_runs_runs_once_and_the_second_is_replayed(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "place_order", order="o-7", qty=2))
    ready(unit, "run-b", call("b1", "place_order", order="o-7", qty=2))

    unit.deliver(DriveCall("run-a", "a1"))

    unit.deliver(DriveCall("run-b", "b1"))

    replayed = unit.memory.read("run-b")[-1].data
    assert isinstance(replayed, ToolCallSucceeded)
    assert replayed.replay_of == "run-a/a1/1"
    assert replayed.output == {"order": "o-7", "qty": 2, "placed": True}
    assert unit_tools.RAN == {"a1": 1}


def test_the_same_business_key_with_another_request_is_refused_as_a_conflict(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "place_order", order="o-7", qty=2))
    ready(unit, "run-b", call("b1", "place_order", order="o-7", qty=5))
    unit.deliver(DriveCall("run-a", "a1"))

    unit.deliver(DriveCall("run-b", "b1"))

    failed = unit.memory.read("run-b")[-1].data
    assert isinstance(failed, ToolCallFailed) and failed.error.code == "conflict"
    assert "run-a/a1/1" in failed.error.message and not failed.error.retryable
    assert unit.call_of("run-b", "b1").status is CallStatus.FAILED
    assert unit_tools.RAN == {"a1": 1}


def test_two_calls_of_a_turn_ending_in_either_order_both_have_their_outcomes_recorded(
    unit: Unit,
) -> None:
    ready(
        unit,
        "run-a",
        call("a1", "kv_write", key="k1", value="1", at="a1"),
        call("a2", "kv_write", key="k2", value="2", at="a2"),
    )
    first = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    [second_command] = unit.take()  # dispatched with a1's claim
    second = unit.start(second_command)
    unit.wait_for(lambda: unit_tools.RAN["a2"] == 1, why="a2 runs")

    unit_tools.gate("a2").set()  # the later call ends first
    second.join()
    unit_tools.gate("a1").set()
    first.join()

    assert unit.store.conflicts == 1, "a1's handler held the state of its own claim"
    assert unit.appends_to("run-a")[-2:] == [("ToolCallSucceeded",), ("ToolCallSucceeded",)]
    assert [unit.call_of("run-a", c).status for c in ("a1", "a2")] == [CallStatus.SUCCEEDED] * 2
    assert unit.store.appends[-1].queued == (RequestModel("run-a"),)
    assert unit_tools.RAN == {"a1": 1, "a2": 1}


def test_a_write_of_unknown_outcome_that_its_target_says_happened_is_recorded_by_lookup(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "kv_commit", key="k", value="1"))
    unit_tools.STALL["k"] = "after"  # it commits, then does not answer
    running = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")

    unknown_while_running(unit)

    unknown = unit.store.appends[-1]
    assert unknown.types == ("ToolCallOutcomeUnknown",), "a resolvable write asks its target"
    assert unknown.queued == (ResolveCall("run-a", "a1"),)
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.REQUESTING_MODEL)
    resolved = unit.store.appends[-1]
    assert (resolved.types, resolved.by) == (("ToolCallSucceeded",), ResolveCall("run-a", "a1"))
    succeeded = unit.memory.read("run-a")[-1].data
    assert isinstance(succeeded, ToolCallSucceeded) and succeeded.resolved_by == "lookup"
    assert succeeded.output == {"key": "k", "committed": "1"}
    appended = len(unit.store.appends)
    unit_tools.gate("a1").set()
    running.join()
    assert len(unit.store.appends) == appended, "the late answer adds nothing"
    assert unit_tools.RAN == {"a1": 1}


def test_a_write_its_target_says_never_happened_runs_again_under_the_same_key(
    unit: Unit,
) -> None:
    ready(unit, "run-a", call("a1", "kv_commit", key="k", value="1"))
    unit_tools.STALL["k"] = "before"  # it stalls before committing
    running = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    unknown_while_running(unit)

    unit.deliver(ResolveCall("run-a", "a1"))

    confirmed = unit.store.appends[-1]
    assert confirmed.types == ("ToolCallConfirmedNotDone",)
    assert confirmed.queued == (DriveCall("run-a", "a1"),)
    unit.take()
    unit.deliver(DriveCall("run-a", "a1"))
    assert unit.call_of("run-a", "a1").status is CallStatus.SUCCEEDED
    assert unit.call_of("run-a", "a1").attempts == 2
    assert list(unit_tools.COMMITTED.values()) == [{"key": "k", "committed": "1"}]
    appended = len(unit.store.appends)
    unit_tools.gate("a1").set()  # the first attempt gives up, long after it was superseded
    running.join()
    assert len(unit.store.appends) == appended, "a superseded attempt's outcome adds nothing"
    assert unit.call_of("run-a", "a1").status is CallStatus.SUCCEEDED
    assert unit_tools.RAN == {"a1": 2}
