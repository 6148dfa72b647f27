"""Locks across runs through the handlers and the in-memory lock table. The table
has one owner and nobody writes into another run's log: a call that must wait
records so in its own run; when the lock is let go — its holder's outcome, a
cancel, the end of the holder's run — the lock table names the waiter and the
writer that let go *sends* the waiter's run a command, whose own handler then
records the grant and claims the call. Calls held at a gate run in a thread so
a test can look at the runs while they run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import unit_tools
from handlerkit import Unit, call, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import DriveCall, RequestModel
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import ToolCallScheduled
from agentledger.services.handlers.engine import Decided
from agentledger.services.loops.sweeper import sweep_once

DONE = {"end_turn": "done"}


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws", lock_lease_s=600.0)  # no lease runs out unless a test says


def write(call_id: str, key: str = "k", **args: str) -> dict[str, Any]:
    return {"tool_use": [call(call_id, "kv_write", key=key, value=call_id, **args)]}


def ready(unit: Unit, run_id: str, *turns: dict[str, Any], **budgets: Any) -> None:
    """A run whose model proposed its first turn's calls; what was dispatched, taken."""
    unit.create(run_id, spec(*turns, DONE, **budgets))
    unit.deliver(RequestModel(run_id))
    unit.take()


def tokens(unit: Unit, run_id: str, call_id: str) -> dict[str, int]:
    [scheduled] = [
        e.data
        for e in unit.memory.read(run_id)
        if isinstance(e.data, ToolCallScheduled) and e.data.call_id == call_id
    ]
    return scheduled.tokens


def test_a_write_waits_for_another_runs_write_and_is_told_by_a_command_when_it_ends(
    unit: Unit,
) -> None:
    ready(unit, "run-a", write("a1", at="a1"))
    ready(unit, "run-b", write("b1"))
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")

    unit.deliver(DriveCall("run-b", "b1"))

    waited = unit.store.appends[-1]
    assert (waited.run_id, waited.types, waited.queued) == (
        "run-b",
        ("ToolCallValidated", "ToolCallWaiting"),
        (),
    )
    assert unit.sent == [] and unit.take() == []
    unit_tools.gate("a1").set()
    holder.join()
    done = unit.store.appends[-1]
    assert (done.run_id, done.types, done.queued) == (
        "run-a",
        ("ToolCallSucceeded",),
        (RequestModel("run-a"),),
    )
    assert unit.sent == [DriveCall("run-b", "b1")], "the waiter is told, after the append"
    assert unit.take() == [RequestModel("run-a"), DriveCall("run-b", "b1")]

    unit.deliver(DriveCall("run-b", "b1"))

    assert unit.appends_to("run-b")[-2:] == [
        ("ToolCallScheduled", "ToolCallStarted"),
        ("ToolCallSucceeded",),
    ]
    assert tokens(unit, "run-b", "b1")["kv:k"] > tokens(unit, "run-a", "a1")["kv:k"]
    assert unit_tools.RAN == {"a1": 1, "b1": 1}
    assert unit.foreign_appends() == []
    # no event of run-a is about run-b's call (a text search would meet hex digests)
    assert not any(getattr(e.data, "call_id", None) == "b1" for e in unit.memory.read("run-a"))


def test_reads_of_two_runs_share_a_key_and_neither_waits(unit: Unit) -> None:
    read = {"tool_use": [call("a1", "kv_read", key="k", at="a1")]}
    ready(unit, "run-a", read)
    ready(unit, "run-b", {"tool_use": [call("b1", "kv_read", key="k")]})
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")

    unit.deliver(DriveCall("run-b", "b1"))

    assert unit.call_of("run-b", "b1").status is CallStatus.SUCCEEDED
    unit_tools.gate("a1").set()
    holder.join()
    assert unit.sent == []


def test_a_cancelled_run_lets_the_next_waiter_in_while_its_running_call_ends(
    unit: Unit,
) -> None:
    turn = {"tool_use": [call("a0", "kv_read", key="z", at="a0"), *write("a1")["tool_use"]]}
    ready(unit, "run-a", turn, max_parallel_calls=1)
    ready(unit, "run-b", write("b1"))
    holder = unit.start(DriveCall("run-a", "a0"))
    unit.wait_for(lambda: unit_tools.RAN["a0"] == 1, why="a0 runs")
    assert unit.call_of("run-a", "a1").status is CallStatus.SCHEDULED  # granted, no room yet
    unit.deliver(DriveCall("run-b", "b1"))
    assert unit.call_of("run-b", "b1").status is CallStatus.WAITING

    unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))
    )

    assert unit.sent == [DriveCall("run-b", "b1")], "told at the cancel, not when a0 ends"
    unit.deliver(DriveCall("run-b", "b1"))
    assert unit.call_of("run-b", "b1").status is CallStatus.SUCCEEDED
    assert unit.state("run-a").status is RunStatus.CANCELLING  # a0 still runs
    unit_tools.gate("a0").set()
    holder.join()
    assert unit.appends_to("run-a")[-1] == ("ToolCallSucceeded", "RunCancelled")
    assert unit_tools.RAN == {"a0": 1, "b1": 1}, "a1 never ran"
    assert unit.foreign_appends() == []


def test_a_run_that_times_out_holding_a_lock_hands_it_on_through_the_sweeper(
    unit: Unit,
) -> None:
    turn = {"tool_use": [call("a0", "kv_read", key="z", at="a0"), *write("a1")["tool_use"]]}
    ready(unit, "run-a", turn, max_parallel_calls=1, max_wall_clock_s=60)
    ready(unit, "run-b", write("b1"))
    holder = unit.start(DriveCall("run-a", "a0"))
    unit.wait_for(lambda: unit_tools.RAN["a0"] == 1, why="a0 runs")
    unit.deliver(DriveCall("run-b", "b1"))
    unit.clock.advance(61 + unit.app.settings.lease_s)
    unit.app.store.touch("run-b", at=unit.clock.now())  # the sweeper re-drives run-a alone

    sweep_once(unit.app, [0])

    assert unit.state("run-a").status is RunStatus.TIMEOUT
    assert unit.appends_to("run-a")[-1] == ("RunTimedOut",)
    assert unit.sent == [DriveCall("run-b", "b1")], "told by the step that ended run-a"
    unit.drive(until=lambda u: u.call_of("run-b", "b1").status is CallStatus.SUCCEEDED)
    unit_tools.gate("a0").set()
    holder.join()
    assert unit_tools.RAN == {"a0": 1, "b1": 1}
    assert unit.foreign_appends() == []


def test_a_waiting_call_of_a_run_that_ends_leaves_the_queue_and_the_next_waiter_gets_the_lock(
    unit: Unit,
) -> None:
    ready(unit, "run-a", write("a1", at="a1"))
    ready(unit, "run-b", write("b1"))
    ready(unit, "run-c", write("c1"))
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    unit.deliver(DriveCall("run-b", "b1"))
    unit.deliver(DriveCall("run-c", "c1"))

    unit.app.engine.take(
        "run-b", Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))
    )

    assert unit.state("run-b").status is RunStatus.CANCELLED, "nothing of it was running"
    assert unit.sent == []  # a1 still holds the lock
    unit_tools.gate("a1").set()
    holder.join()
    assert unit.sent == [DriveCall("run-c", "c1")], "the lock skips the run that ended"
    unit.deliver(DriveCall("run-c", "c1"))
    assert unit.call_of("run-c", "c1").status is CallStatus.SUCCEEDED
    assert unit_tools.RAN == {"a1": 1, "c1": 1}
    assert unit.foreign_appends() == []


def test_conflicting_writes_of_one_turn_run_in_the_order_the_model_proposed_them(
    unit: Unit,
) -> None:
    turn = {"tool_use": [*write("w1")["tool_use"], *write("w2")["tool_use"]]}
    ready(unit, "run-a", turn)
    unit.deliver(DriveCall("run-a", "w1"))

    delivered = unit.drive(until=lambda u: u.state("run-a").status is RunStatus.REQUESTING_MODEL)

    assert delivered == [DriveCall("run-a", "w2")]
    steps = unit.appends_to("run-a")[3:]
    assert steps == [
        ("ToolCallValidated", "ToolCallValidated", "ToolCallScheduled", "ToolCallWaiting",
         "ToolCallStarted"),
        ("ToolCallSucceeded",),
        ("ToolCallScheduled", "ToolCallStarted"),
        ("ToolCallSucceeded",),
    ]  # fmt: skip
    assert unit.sent == [DriveCall("run-a", "w2")], "its own run is told like any other"
    assert tokens(unit, "run-a", "w2")["kv:k"] > tokens(unit, "run-a", "w1")["kv:k"]


def test_a_holder_whose_lease_ran_out_loses_the_lock_to_the_waiter_told_by_a_command(
    tmp_path: Path,
) -> None:
    unit = new_unit(tmp_path / "ws", lock_lease_s=60.0)  # nobody renews within a test
    ready(unit, "run-a", write("a1", at="a1"))
    ready(unit, "run-b", write("b1"))
    holder = unit.start(DriveCall("run-a", "a1"))
    unit.wait_for(lambda: unit_tools.RAN["a1"] == 1, why="a1 runs")
    unit.deliver(DriveCall("run-b", "b1"))
    unit.clock.advance(61.0)
    for run_id in ("run-a", "run-b"):  # neither is idle: the sweeper only ends leases
        unit.app.store.touch(run_id, at=unit.clock.now())

    sweep_once(unit.app, [0])

    expiry = unit.store.appends[-1]
    assert (expiry.run_id, expiry.types, expiry.by) == ("run-a", ("ToolCallLeaseExpired",), None)
    assert unit.sent == [DriveCall("run-b", "b1")]
    unit.deliver(DriveCall("run-b", "b1"))
    assert unit.call_of("run-b", "b1").status is CallStatus.SUCCEEDED
    assert tokens(unit, "run-b", "b1")["kv:k"] > tokens(unit, "run-a", "a1")["kv:k"]
    unit_tools.gate("a1").set()
    holder.join()
    # what a1 did is recorded as it happened; its lower token is what a target refuses
    assert unit.appends_to("run-a")[-1] == ("ToolCallSucceeded",)
    assert unit.foreign_appends() == []
