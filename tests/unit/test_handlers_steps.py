"""The handlers' steps through the in-memory adapters: what each command's handler
appends, in how many appends, and which commands it dispatches with them — the
model step (claim, then reply), a call driven from validation to its claim in
one append, its outcome, rejections, an approval, and acceptance. Commands are
delivered only as the handlers dispatched them."""

from __future__ import annotations

from pathlib import Path

import pytest
import unit_tools
from handlerkit import Unit, call, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import DriveCall, RequestModel, RunAcceptance
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import (
    AcceptanceChecked,
    ModelRequested,
    ToolCallFailed,
    ToolCallRejected,
)
from agentledger.services.handlers.engine import Decided

TWO_CALLS = {
    "tool_use": [call("c1", "kv_write", key="k", value="1"), call("c2", "kv_read", key="j")]
}
DONE = {"end_turn": "done"}


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


def test_a_new_run_queues_its_first_model_request_with_its_first_event(unit: Unit) -> None:
    unit.create("run-a", spec(DONE))

    assert [(a.types, a.queued) for a in unit.store.appends] == [
        (("RunCreated",), (RequestModel("run-a"),))
    ]


def test_a_model_step_claims_then_records_the_reply_and_dispatches_the_first_call_with_it(
    unit: Unit,
) -> None:
    unit.create("run-a", spec(TWO_CALLS, DONE))
    unit.take()

    unit.deliver(RequestModel("run-a"))

    claim, reply = unit.store.appends[1:]
    assert (claim.types, claim.queued) == (("ModelRequested",), ())
    assert reply.types == ("ModelResponded", "ToolCallProposed", "ToolCallProposed")
    assert reply.queued == (DriveCall("run-a", "c1"),)  # one step validates the whole turn
    claimed = unit.memory.read("run-a")[1].data
    assert isinstance(claimed, ModelRequested) and claimed.context_hash
    assert unit.state("run-a").status is RunStatus.VALIDATING
    assert unit.take() == [DriveCall("run-a", "c1")]


def test_a_model_request_delivered_again_after_its_reply_appends_nothing(unit: Unit) -> None:
    unit.create("run-a", spec(TWO_CALLS, DONE))
    unit.deliver(RequestModel("run-a"))
    seq = unit.state("run-a").seq

    unit.deliver(RequestModel("run-a"))

    assert unit.state("run-a").seq == seq
    assert len(unit.store.appends) == 3


def test_one_drive_call_validates_the_turn_takes_its_locks_and_claims_in_one_append(
    unit: Unit,
) -> None:
    unit.create("run-a", spec(TWO_CALLS, DONE))
    unit.deliver(RequestModel("run-a"))
    unit.take()

    unit.deliver(DriveCall("run-a", "c1"))

    step, outcome = unit.store.appends[3:]
    assert step.types == (
        "ToolCallValidated",
        "ToolCallValidated",
        "ToolCallScheduled",
        "ToolCallScheduled",
        "ToolCallStarted",
    )
    assert step.queued == (DriveCall("run-a", "c2"),), "the other call is dispatched with it"
    assert (outcome.types, outcome.queued) == (("ToolCallSucceeded",), ())
    assert unit.call_of("run-a", "c1").status is CallStatus.SUCCEEDED
    assert unit_tools.RAN == {"c1": 1}


def test_the_last_outcome_of_a_turn_dispatches_the_next_model_request_with_it(
    unit: Unit,
) -> None:
    unit.create("run-a", spec(TWO_CALLS, DONE))
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.RUNNING_TOOLS)
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.REQUESTING_MODEL)

    last = unit.store.appends[-1]
    assert (last.types, last.queued) == (("ToolCallSucceeded",), (RequestModel("run-a"),))
    assert unit_tools.RAN == {"c1": 1, "c2": 1}


def test_a_run_goes_from_created_to_completed_on_the_commands_its_writers_dispatched(
    unit: Unit,
) -> None:
    unit.create("run-a", spec(TWO_CALLS, DONE))

    delivered = unit.drive()

    assert delivered == [
        RequestModel("run-a"),
        DriveCall("run-a", "c1"),
        DriveCall("run-a", "c2"),
        RequestModel("run-a"),
        RunAcceptance("run-a"),
    ]
    assert unit.state("run-a").status is RunStatus.COMPLETED
    assert len(unit.store.appends) == 11, "two appends per model turn, four per two calls"
    assert unit.foreign_appends() == []


def test_a_drive_call_delivered_again_runs_the_tool_once(unit: Unit) -> None:
    unit.create("run-a", spec(TWO_CALLS, DONE))
    unit.deliver(RequestModel("run-a"))
    unit.deliver(DriveCall("run-a", "c1"))
    seq = unit.state("run-a").seq

    unit.deliver(DriveCall("run-a", "c1"))  # the broker delivered it again

    assert unit.state("run-a").seq == seq
    assert unit_tools.RAN == {"c1": 1}
    assert unit.types("run-a").count("ToolCallStarted") == 1


def test_a_tool_that_fails_is_recorded_as_failed_and_the_model_is_asked_again(
    unit: Unit,
) -> None:
    unit.create("run-a", spec({"tool_use": [call("c1", "kv_refuse", key="k")]}, DONE))

    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.REQUESTING_MODEL
               and u.state("run-a").turns_used == 1)  # fmt: skip

    failed = unit.memory.read("run-a")[-1].data
    assert isinstance(failed, ToolCallFailed)
    assert (failed.error.code, failed.error.retryable) == ("conflict", False)
    assert unit.store.appends[-1].queued == (RequestModel("run-a"),)
    assert unit_tools.RAN == {"c1": 1}


def test_a_call_to_a_tool_outside_the_tool_set_is_rejected_and_never_runs(unit: Unit) -> None:
    unit.create("run-a", spec({"tool_use": [call("c1", "no_such_tool", key="k")]}, DONE))
    unit.deliver(RequestModel("run-a"))

    unit.deliver(DriveCall("run-a", "c1"))

    step = unit.store.appends[-1]
    assert step.types == ("ToolCallRejected",)
    assert step.queued == (RequestModel("run-a"),)
    rejected = unit.memory.read("run-a")[-1].data
    assert isinstance(rejected, ToolCallRejected) and "no_such_tool" in rejected.error.message
    assert unit_tools.RAN == {}


def test_arguments_that_do_not_fit_the_schema_are_rejected_naming_the_field(unit: Unit) -> None:
    unit.create("run-a", spec({"tool_use": [call("c1", "kv_write", key="k")]}, DONE))
    unit.deliver(RequestModel("run-a"))

    unit.deliver(DriveCall("run-a", "c1"))

    rejected = unit.memory.read("run-a")[-1].data
    assert isinstance(rejected, ToolCallRejected)
    assert [f.loc for f in rejected.error.fields] == ["value"]
    assert unit_tools.RAN == {}


def test_a_call_that_needs_approval_waits_for_it_and_runs_once_approved(unit: Unit) -> None:
    unit.create("run-a", spec({"tool_use": [call("c1", "kv_delete", key="k")]}, DONE))
    unit.deliver(RequestModel("run-a"))
    unit.deliver(DriveCall("run-a", "c1"))
    asked = unit.store.appends[-1]
    assert asked.types[-1] == "ApprovalRequested" and asked.queued == ()
    assert unit.state("run-a").status is RunStatus.AWAITING_APPROVAL
    assert unit_tools.RAN == {}
    unit.take()

    step = unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.approve(s, "c1", by="alice"))
    )

    assert unit.store.appends[-1].queued == (DriveCall("run-a", "c1"),)
    assert step.state.status is RunStatus.RUNNING_TOOLS
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.REQUESTING_MODEL)
    assert unit.call_of("run-a", "c1").status is CallStatus.SUCCEEDED
    assert unit_tools.RAN == {"c1": 1}


def test_acceptance_runs_its_checks_on_the_workspace_and_completes_the_run(unit: Unit) -> None:
    (unit.workspace / "out.txt").write_text("all done\n")
    run_spec = spec(DONE, acceptance=[{"file": "out.txt", "contains": "all done"}])
    unit.create("run-a", run_spec)

    unit.drive()

    assert unit.appends_to("run-a")[-2:] == [
        ("AcceptanceStarted",),
        ("AcceptanceChecked", "RunCompleted"),
    ]
    checked = unit.memory.read("run-a")[-2].data
    assert isinstance(checked, AcceptanceChecked) and checked.passed
    assert unit.state("run-a").status is RunStatus.COMPLETED


def test_a_failed_check_sends_the_run_back_to_the_model_with_the_feedback(unit: Unit) -> None:
    run_spec = spec(DONE, DONE, acceptance=[{"file": "out.txt", "contains": "all done"}])
    unit.create("run-a", run_spec)

    unit.drive(until=lambda u: u.state("run-a").turns_used == 1
               and u.state("run-a").status is RunStatus.REQUESTING_MODEL)  # fmt: skip

    last = unit.store.appends[-1]
    assert last.types == ("AcceptanceChecked", "AcceptanceFailed")
    assert last.queued == (RequestModel("run-a"),)
    checked = unit.memory.read("run-a")[-2].data
    assert isinstance(checked, AcceptanceChecked) and not checked.passed


def test_a_tool_failing_with_an_unknown_error_code_is_recorded_as_an_internal_failure(
    unit: Unit,
) -> None:
    unit.create("run-a", spec({"tool_use": [call("c1", "kv_odd_failure", key="k")]}, DONE))
    unit.deliver(RequestModel("run-a"))

    unit.deliver(DriveCall("run-a", "c1"))

    failed = unit.memory.read("run-a")[-1].data
    assert isinstance(failed, ToolCallFailed)
    assert failed.error.code == "internal" and "'on_fire'" in failed.error.message
    assert unit.store.appends[-1].queued == (RequestModel("run-a"),)
