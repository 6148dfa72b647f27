"""Cancellation is a request, not a guarantee. RunCancelRequested moves the run
to cancelling at once; each running call then ends `cancelled` (it stopped by
itself) or `force_terminated` (killed after the grace period), with when the
stop was asked for and when it happened; once nothing runs the run ends
cancelled, in the same batch, listing the side effects that had already
happened — nothing is claimed to be rolled back. A model reply that comes
after the cancel is recorded and not acted on."""

from __future__ import annotations

import pytest
from journeys import JOURNEYS, in_flight, reach
from runlog import (
    LEASE_S,
    T0,
    Log,
    do_cancel,
    do_claim,
    do_finish,
    do_model_turn,
    do_request,
    do_tools,
    do_validate,
    text,
    use,
)

from agentledger.events.dispatch import due_commands
from agentledger.events.model_retry import ModelFailure
from agentledger.events.model_step import record_model_error, record_model_reply, request_model
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import Errored, StillRunning, Stopped, Succeeded, claim_call
from agentledger.events.types import (
    ModelResponded,
    RunCancelled,
    RunCancelRequested,
    ToolCallCancelled,
    ToolCallForceTerminated,
    ToolCallOutcomeUnknown,
    ToolCallSucceeded,
    ToolError,
)
from agentledger.schemas.content import Usage

R, C = RunStatus, CallStatus
CANCEL_AT = T0 + 20
NONE_DONE = "cancelled by carol; side effects already done (not rolled back): none"


def test_a_run_with_nothing_running_is_cancelled_at_once() -> None:
    log = Log.created()
    events = do_cancel(log, now=CANCEL_AT)
    assert events == [
        RunCancelRequested(by="carol", source="cli", reason="not needed any more"),
        RunCancelled(requested_at=CANCEL_AT, by="carol", side_effects=(), detail=NONE_DONE),
    ]
    assert log.s.status is R.CANCELLED
    assert log.s.detail == NONE_DONE
    assert due_commands(log.s, now=CANCEL_AT + 1e6) == []


def test_a_cancelled_run_lists_the_writes_that_had_happened_and_not_the_reads() -> None:
    log = Log.created()
    do_model_turn(log, use("w1", "write_file", path="a"), use("r", path="b"))
    do_tools(log)
    do_model_turn(log, use("w2", "write_file", path="c"), use("w3", "write_file", path="d"))
    do_validate(log, "w2")
    do_validate(log, "w3")
    do_claim(log, "w2")
    do_finish(log, "w2", Errored(ToolError(code="conflict", message="no", retryable=False)))
    events = do_cancel(log, now=CANCEL_AT)  # w3 was never started
    cancelled = events[-1]
    assert isinstance(cancelled, RunCancelled)
    assert cancelled.side_effects == ("write_file(w1) succeeded",)
    assert cancelled.detail == (
        "cancelled by carol; side effects already done (not rolled back): write_file(w1) succeeded"
    )
    assert log.call("w3").status is C.VALIDATED
    assert claim_call(log.s, "w3", worker="w", now=CANCEL_AT) == []


def cancelled_while_running(*call_ids: str) -> Log:
    log = Log.created()
    in_flight(log, *call_ids)
    events = do_cancel(log, now=CANCEL_AT)
    assert events == [RunCancelRequested(by="carol", source="cli", reason="not needed any more")]
    assert log.s.status is R.CANCELLING
    assert (log.s.cancel_requested_at, log.s.cancel_by) == (CANCEL_AT, "carol")
    return log


def test_a_run_with_a_call_running_is_cancelling_until_the_call_stops() -> None:
    log = cancelled_while_running("a")
    assert due_commands(log.s, now=CANCEL_AT + 1e6) == []
    assert log.s.in_flight == [log.call("a")]


def test_a_call_that_stops_by_itself_is_cancelled_with_both_times_and_the_run_ends() -> None:
    log = cancelled_while_running("a")
    events = do_finish(log, "a", Stopped(requested_at=CANCEL_AT, killed=False), now=CANCEL_AT + 2)
    assert events[0] == ToolCallCancelled(
        call_id="a", requested_at=CANCEL_AT, stopped_at=CANCEL_AT + 3
    )
    assert isinstance(events[1], RunCancelled)
    assert events[1].requested_at == CANCEL_AT
    assert events[1].side_effects == ("write_file(a) cancelled",)
    assert "stopped: a cancelled" in events[1].detail
    assert log.s.status is R.CANCELLED
    assert log.call("a").status is C.CANCELLED
    assert log.call("a").finished_at == CANCEL_AT + 3


def test_a_call_killed_after_the_grace_period_is_force_terminated() -> None:
    log = cancelled_while_running("a")
    stop = Stopped(requested_at=CANCEL_AT, killed=True, detail="SIGKILL to 1 process group(s)")
    events = do_finish(log, "a", stop, now=CANCEL_AT + 5)
    assert events[0] == ToolCallForceTerminated(
        call_id="a",
        requested_at=CANCEL_AT,
        terminated_at=CANCEL_AT + 6,
        detail="SIGKILL to 1 process group(s)",
    )
    assert isinstance(events[1], RunCancelled)
    assert "stopped: a force_terminated" in events[1].detail
    assert log.call("a").status is C.FORCE_TERMINATED


def test_the_run_ends_when_the_last_of_its_calls_stops() -> None:
    log = cancelled_while_running("a", "b")
    first = do_finish(log, "a", Stopped(requested_at=CANCEL_AT, killed=False))
    assert [type(e) for e in first] == [ToolCallCancelled]
    assert log.s.status is R.CANCELLING
    last = do_finish(log, "b", Stopped(requested_at=CANCEL_AT, killed=True))
    assert [type(e) for e in last] == [ToolCallForceTerminated, RunCancelled]
    assert "stopped: a cancelled, b force_terminated" in last[-1].detail  # type: ignore[union-attr]


def test_a_call_that_finishes_anyway_is_recorded_as_a_side_effect() -> None:
    log = cancelled_while_running("a")
    events = do_finish(log, "a", Succeeded(output="written"))
    assert [type(e) for e in events] == [ToolCallSucceeded, RunCancelled]
    assert events[-1].side_effects == ("write_file(a) succeeded",)  # type: ignore[union-attr]


def test_a_call_that_could_not_be_stopped_has_an_unknown_outcome() -> None:
    log = cancelled_while_running("a")
    events = do_finish(log, "a", StillRunning(requested_at=CANCEL_AT))
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, RunCancelled]
    assert events[0].reason == (  # type: ignore[union-attr]
        f"asked to stop at {CANCEL_AT:.3f} and still running after the grace period"
    )
    assert events[-1].side_effects == ("write_file(a) outcome_unknown",)  # type: ignore[union-attr]


def test_a_call_whose_worker_went_silent_while_cancelling_ends_the_run_on_a_tick() -> None:
    log = cancelled_while_running("a")
    deadline = log.call("a").claim_deadline
    assert on_tick(log.s, now=deadline - 0.001) == []  # type: ignore[operator]
    events = log.decide(on_tick, now=deadline)
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, RunCancelled]
    assert log.s.status is R.CANCELLED


def test_the_results_of_stopped_calls_say_the_run_was_cancelled() -> None:
    log = cancelled_while_running("a")
    do_finish(log, "a", Stopped(requested_at=CANCEL_AT, killed=False))
    error = log.call("a").error
    assert error is not None and error.code == "internal" and not error.retryable
    assert error.message == "the call was cancelled because the run was cancelled"


def test_a_model_reply_after_the_cancel_is_recorded_and_no_call_is_proposed() -> None:
    log = JOURNEYS["reply_after_cancel"][0]()
    [responded] = [e.data for e in log.envelopes if isinstance(e.data, ModelResponded)]
    assert responded.stop_reason == "tool_use"
    assert log.envelopes[-1].data == responded  # nothing after it
    assert log.s.status is R.CANCELLED
    assert log.s.current_turn is not None and log.s.current_turn.calls == ()
    assert log.s.usage == Usage(input_tokens=10, output_tokens=5)


def test_a_model_reply_after_the_cancel_is_recorded_once() -> None:
    log = Log.created()
    claimed = do_request(log)
    do_cancel(log)
    reply = dict(
        turn=claimed.turn,
        attempt=claimed.attempt,
        content=[text("done")],
        stop_reason="end_turn",
        usage=Usage(),
        model="scripted",
    )
    assert len(log.decide(record_model_reply, **reply)) == 1
    assert record_model_reply(log.s, **reply) == []  # type: ignore[arg-type]


def test_a_model_error_after_the_cancel_is_not_recorded() -> None:
    log = Log.created()
    claimed = do_request(log)
    do_cancel(log)
    overloaded = ModelFailure("overloaded", "overloaded (529 overloaded_error): Overloaded")
    assert record_model_error(log.s, turn=claimed.turn, attempt=1, failure=overloaded, now=T0) == []


def test_no_model_is_asked_once_the_run_is_cancelled() -> None:
    log = JOURNEYS["cancelled_from_requesting_model"][0]()
    assert request_model(log.s, now=T0 + 10 * LEASE_S, lease_s=LEASE_S) == []


def test_a_run_waiting_for_a_person_can_be_cancelled_while_a_call_still_runs() -> None:
    log = JOURNEYS["cancelled_while_waiting"][0]()
    cancelled = log.envelopes[-1].data
    assert isinstance(cancelled, RunCancelled)
    assert cancelled.side_effects == ("write_file(w) outcome_unknown", "write_file(v) cancelled")


@pytest.mark.parametrize("status", [R.VALIDATING, R.ACCEPTING, R.AWAITING_APPROVAL])
def test_a_run_is_cancelled_from_any_state_it_can_be_stopped_in(status: RunStatus) -> None:
    log = reach(status)
    do_cancel(log)
    assert log.s.status is R.CANCELLED


def test_an_approval_request_left_open_by_a_cancel_does_not_expire_later() -> None:
    log = reach(R.AWAITING_APPROVAL)
    do_cancel(log)
    assert on_tick(log.s, now=T0 + 1e6) == []
