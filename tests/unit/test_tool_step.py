"""Given a run with proposed calls, when the validator, the tool worker or the
sweeper decides, then these events: rejections the model can act on, one claim
per attempt, and outcomes that say whether the effect may have happened."""

from __future__ import annotations

from runlog import T0, TOOLS, Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events.read_retry import MAX_READ_ATTEMPTS
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import (
    Errored,
    Lost,
    Stopped,
    Succeeded,
    TimedOut,
    claim_call,
    record_outcome,
)
from agentledger.events.types import (
    FieldError,
    RunEscalated,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolError,
)
from agentledger.events.validation_step import Finding, validate_call

R, C = RunStatus, CallStatus


def proposed(*blocks: object) -> Log:
    log = Log.created()
    do_model_turn(log, *blocks)  # type: ignore[arg-type]
    return log


def running(*blocks: object) -> Log:
    log = proposed(*blocks)
    for call in log.s.current_turn.calls:  # type: ignore[union-attr]
        do_validate(log, call.call_id)
    assert log.s.status is R.RUNNING_TOOLS
    return log


def test_an_unknown_tool_is_rejected_naming_the_tools_there_are() -> None:
    log = proposed(use("a", "rm_rf"))
    [rejected] = do_validate(log, "a")
    assert isinstance(rejected, ToolCallRejected)
    assert rejected.error.code == "unknown_tool" and not rejected.error.retryable
    assert "'rm_rf'" in rejected.error.message and "read_file" in rejected.error.message


def test_arguments_with_field_errors_are_rejected_with_those_fields() -> None:
    log = proposed(use("a"))
    errors = [FieldError(loc="path", msg="Field required"), FieldError(loc="n", msg="not int")]
    [rejected] = do_validate(log, "a", field_errors=errors)
    assert rejected.error.code == "invalid_arguments"  # type: ignore[union-attr]
    assert rejected.error.fields == tuple(errors)  # type: ignore[union-attr]
    assert rejected.error.message == "path: Field required; n: not int"  # type: ignore[union-attr]


def test_a_tool_whose_scope_the_principal_lacks_is_denied() -> None:
    log = proposed(use("a", "drop_table"))
    [rejected] = do_validate(log, "a")
    assert rejected.error.code == "permission_denied"  # type: ignore[union-attr]
    assert "'alice' lacks scope 'db:admin'" in rejected.error.message  # type: ignore[union-attr]


def test_a_valid_call_carries_the_tools_execution_contract() -> None:
    log = proposed(use("a", "write_file", path="y"))
    events = log.decide(
        validate_call,
        "a",
        found=Finding(tool=TOOLS["write_file"], writes=("file:y",)),
        known_tools=sorted(TOOLS),
        now=T0,
    )
    assert events == [
        ToolCallValidated(call_id="a", read_only=False, writes=("file:y",), timeout_s=10.0)
    ]


def test_validating_a_decided_call_again_returns_nothing() -> None:
    log = proposed(use("a"), use("b"))
    do_validate(log, "a")
    assert do_validate(log, "a") == []


def test_a_call_is_claimed_once_with_a_deadline_past_its_timeout() -> None:
    log = running(use("a"))
    events = log.decide(claim_call, "a", worker="w1", now=T0)
    assert events == [
        ToolCallStarted(
            call_id="a",
            attempt=1,
            worker="w1",
            deadline_at=T0 + 5.0 + 2.0,  # timeout + policies.claim_grace_s
            claimed_at=T0,
        )
    ]
    assert claim_call(log.s, "a", worker="w2", now=T0 + 1) == []


def test_a_success_is_recorded_once() -> None:
    log = running(use("a"), use("b"))
    do_claim(log, "a")
    events = do_finish(log, "a", Succeeded(output={"lines": 3}))
    assert events == [
        ToolCallSucceeded(call_id="a", output={"lines": 3}, started_at=T0, finished_at=T0 + 1)
    ]
    assert do_finish(log, "a", Succeeded(output={"lines": 3})) == []


def test_an_outcome_of_another_attempt_is_ignored() -> None:
    log = running(use("a"))
    do_claim(log, "a")
    stale = record_outcome(
        log.s, "a", attempt=2, outcome=Succeeded(output=1), started_at=T0, finished_at=T0
    )
    assert stale == []


def test_a_tool_error_is_recorded_as_the_call_failing() -> None:
    log = running(use("a"))
    do_claim(log, "a")
    error = ToolError(code="not_found", message="no such file", retryable=False)
    [failed] = do_finish(log, "a", Errored(error))
    assert isinstance(failed, ToolCallFailed) and failed.error == error
    assert log.s.status is R.REQUESTING_MODEL


def test_a_read_only_call_timing_out_fails_with_a_retryable_timeout() -> None:
    log = running(use("a"))
    do_claim(log, "a")
    [failed] = do_finish(log, "a", TimedOut(after_s=5.0))
    assert isinstance(failed, ToolCallFailed)
    assert (failed.error.code, failed.error.retryable) == ("timeout", True)
    assert failed.error.message == "no result within 5s"


def test_a_write_timing_out_has_an_unknown_outcome_and_waits_for_a_human() -> None:
    log = running(use("w", "write_file"))
    do_claim(log, "w")
    events = do_finish(log, "w", TimedOut(after_s=10.0))
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, RunEscalated]
    assert events[1].reason == "outcome_unknown"  # type: ignore[union-attr]
    assert "write_file(w)" in events[1].detail  # type: ignore[union-attr]
    assert log.s.status is R.AWAITING_HUMAN
    assert log.s.call("w").status is C.OUTCOME_UNKNOWN  # type: ignore[union-attr]


def test_a_write_whose_server_died_mid_call_is_unknown_and_waits_for_a_human() -> None:
    log = running(use("w", "write_file"))
    do_claim(log, "w")
    events = do_finish(log, "w", Lost("MCP server 'fs' went down mid-call"))
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, RunEscalated]
    assert events[0].reason == "MCP server 'fs' went down mid-call"  # type: ignore[union-attr]
    assert log.s.call("w").status is C.OUTCOME_UNKNOWN  # type: ignore[union-attr]


def test_a_read_whose_server_died_mid_call_may_be_tried_again() -> None:
    log = running(use("a"))
    do_claim(log, "a")
    events = do_finish(log, "a", Lost("gone"))
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown]
    assert log.s.status is R.RUNNING_TOOLS


def test_no_claim_expires_before_its_deadline() -> None:
    log = running(use("a"))
    do_claim(log, "a")
    deadline = log.s.call("a").claim_deadline  # type: ignore[union-attr]
    assert on_tick(log.s, now=deadline - 0.001) == []


def test_an_expired_write_claim_escalates_once() -> None:
    log = running(use("w", "write_file"))
    do_claim(log, "w")
    deadline = log.s.call("w").claim_deadline  # type: ignore[union-attr]
    events = log.decide(on_tick, now=deadline)
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, RunEscalated]
    assert on_tick(log.s, now=deadline + 100) == []


def test_an_expired_read_claim_is_tried_again_until_its_attempts_run_out() -> None:
    log = running(use("r"))
    now = T0
    for attempt in range(1, MAX_READ_ATTEMPTS + 1):
        assert do_claim(log, "r", now=now) == attempt
        now = log.s.call("r").claim_deadline  # type: ignore[union-attr,assignment]
        events = log.decide(on_tick, now=now)
        if attempt < MAX_READ_ATTEMPTS:
            assert [type(e) for e in events] == [ToolCallOutcomeUnknown]
            assert log.s.status is R.RUNNING_TOOLS
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, ToolCallFailed]
    assert events[1].error.code == "timeout" and not events[1].error.retryable  # type: ignore[union-attr]
    assert log.s.status is R.REQUESTING_MODEL
    assert claim_call(log.s, "r", worker="w", now=now) == []


def test_a_write_whose_outcome_is_unknown_is_never_claimed_again() -> None:
    log = running(use("w", "write_file"), use("r"))
    do_claim(log, "w")
    do_finish(log, "w", TimedOut(after_s=10.0))
    assert claim_call(log.s, "w", worker="w2", now=T0 + 100) == []


def test_an_outcome_that_comes_after_an_escalation_is_recorded_and_the_run_keeps_waiting() -> None:
    log = running(use("w1", "write_file"), use("w2", "write_file"))
    do_claim(log, "w1")
    do_claim(log, "w2")
    do_finish(log, "w1", TimedOut(after_s=10.0))
    assert log.s.status is R.AWAITING_HUMAN
    events = do_finish(log, "w2", Succeeded(output="ok"))
    assert [type(e) for e in events] == [ToolCallSucceeded]
    assert log.s.status is R.AWAITING_HUMAN
    assert log.call("w2").status is C.SUCCEEDED


def test_a_write_timing_out_while_the_run_waits_is_recorded_unknown_without_escalating_again() -> (
    None
):
    log = running(use("w1", "write_file"), use("w2", "write_file"))
    do_claim(log, "w1")
    do_claim(log, "w2")
    do_finish(log, "w1", TimedOut(after_s=10.0))
    events = do_finish(log, "w2", TimedOut(after_s=10.0))
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown]
    assert log.s.status is R.AWAITING_HUMAN


def test_a_timeout_cap_in_the_spec_shortens_a_tools_own_timeout() -> None:
    log = Log.created(budgets={"tool_timeout_s": 3})
    do_model_turn(log, use("w", "write_file"))
    [validated] = do_validate(log, "w")
    assert validated.timeout_s == 3  # type: ignore[union-attr]


def test_the_result_of_a_write_whose_claim_expired_is_still_recorded() -> None:
    log = running(use("w", "write_file"))
    do_claim(log, "w")
    log.decide(on_tick, now=log.call("w").claim_deadline)
    assert log.s.status is R.AWAITING_HUMAN
    events = record_outcome(
        log.s, "w", attempt=1, outcome=Succeeded(output="ok"), started_at=T0, finished_at=T0 + 20
    )
    assert [type(e) for e in events] == [ToolCallSucceeded]


def test_a_call_that_stops_by_itself_while_the_run_goes_on_is_recorded_as_failed() -> None:
    log = running(use("a"))
    do_claim(log, "a")
    events = do_finish(log, "a", Stopped(requested_at=T0, killed=False))
    [failed] = [e for e in events if isinstance(e, ToolCallFailed)]
    assert failed.call_id == "a" and failed.error.code == "internal"
    assert failed.error.message == "the tool stopped as if cancelled, but nobody asked it to"
    assert not failed.error.retryable
    assert log.call("a").status is C.FAILED  # not cancelled: nobody asked it to stop
