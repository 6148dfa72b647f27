"""Causes are told where a person looks: a failed check's line names its exit code
and the last lines its command wrote; a run that failed acceptance says so first,
then what ended it; a write answered from the ledger is marked in the timeline;
a tool's unexpected exception is recorded with its traceback; a second Ctrl-C
tells the run as it is once the workers stopped."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from runlog import (
    LEASE_S,
    Log,
    check,
    do_accept,
    do_cancel,
    do_claim,
    do_finish,
    do_model_turn,
    do_request,
    do_validate,
    envelope,
    text,
    use,
)
from test_snapshot_codec import round_trip

from agentledger.events.causes import (
    TAIL_CHARS,
    acceptance_failure,
    after_acceptance,
    check_cause,
    last_lines,
)
from agentledger.events.model_retry import ModelFailure
from agentledger.events.model_step import record_model_error, request_model
from agentledger.events.status import RunStatus
from agentledger.events.tool_step import Errored, Succeeded
from agentledger.events.types import (
    AcceptanceChecked,
    RunAborted,
    RunEscalated,
    RunFailed,
    ToolCallFailed,
    ToolCallSucceeded,
    ToolError,
)
from agentledger.services.entrypoints.cli.embedded import left
from agentledger.services.entrypoints.describe import line, summary

R = RunStatus
PYTEST_STDERR = (
    "collected 1 item\n\n    def test_add():\n>       assert add(1, 1) == 3\nE   assert 2 == 3\n"
)


def command_evidence(code: int, *, stderr: str = "", stdout: str = "") -> dict[str, Any]:
    """As the acceptance worker records a command check's evidence."""
    evidence: dict[str, Any] = {"exit_code": code, "stdout_tail": stdout, "stderr_tail": stderr}
    if code != 0:
        evidence["reason"] = f"exit {code}"
    return evidence


# ---- a failed check's cause ------------------------------------------------------


def test_a_failed_command_is_told_with_its_exit_code_and_its_stderrs_last_lines() -> None:
    cause = check_cause(command_evidence(1, stderr=PYTEST_STDERR, stdout="F\n"))
    assert cause == "exit 1; stderr: …>       assert add(1, 1) == 3 | E   assert 2 == 3"


def test_a_command_that_wrote_nothing_to_stderr_is_told_with_its_stdout() -> None:
    cause = check_cause(command_evidence(2, stdout="FAILED t.py::x - assert 1 == 0\n1 failed\n"))
    assert cause == "exit 2; stdout: FAILED t.py::x - assert 1 == 0 | 1 failed"


def test_a_command_that_wrote_nothing_is_told_with_its_exit_code_alone() -> None:
    assert check_cause(command_evidence(3, stdout=" \n")) == "exit 3"


def test_a_passing_command_failed_on_stale_evidence_is_told_without_its_output() -> None:
    evidence = {
        **command_evidence(0, stdout="all good\n"),
        "reason": "stale evidence: w1 wrote later",
    }
    assert check_cause(evidence) == "stale evidence: w1 wrote later"


def test_a_long_tail_is_capped_keeping_its_end() -> None:
    told = last_lines("x" * 1000 + "\nE   the end\n")
    assert len(told) == TAIL_CHARS and told.startswith("…") and told.endswith("E   the end")


def test_a_check_with_no_reason_is_told_failed() -> None:
    assert check_cause({}) == "failed"


def test_a_tool_checks_long_answer_is_capped() -> None:
    cause = check_cause({"reason": f"got {{'rows': {'y' * 500!r}}}"})
    assert cause.startswith("got {'rows': 'yyy") and cause.endswith("…") and len(cause) == 200


def test_an_acceptance_is_told_by_how_many_checks_failed_and_the_first_ones_cause() -> None:
    checks = [
        ("file 'a' exists", True, {}),
        ("command 'pytest -q' exits 0", False, command_evidence(1, stderr="E   assert 2 == 3\n")),
        ("file 'b' contains 'x'", False, {"reason": "'x' not found in its 3 characters"}),
    ]
    assert acceptance_failure(checks) == (
        "acceptance failed (2 of 3 checks: command 'pytest -q' exits 0: exit 1; stderr: E   assert 2 == 3)"
    )
    assert acceptance_failure(checks[:1]) is None


def test_an_end_after_no_failed_acceptance_is_told_as_it_is() -> None:
    assert after_acceptance(None, "cancelled by bob") == "cancelled by bob"
    assert after_acceptance("acceptance failed (…)", "") == "acceptance failed (…)"


# ---- the run's detail ----------------------------------------------------------


def failed_once(*, max_turns: int = 3) -> Log:
    """A run whose first acceptance failed on a command, the failure back to the model."""
    log = Log.created(max_turns=max_turns)
    do_model_turn(log, text("done"))
    evidence = command_evidence(1, stderr="E   assert 2 == 3\n")
    do_accept(log, dataclasses.replace(check(False), evidence=evidence))
    assert log.s.status is R.REQUESTING_MODEL
    return log


def test_a_run_that_failed_acceptance_then_lost_its_model_says_the_acceptance_first() -> None:
    log = failed_once()
    claimed = do_request(log)
    failure = ModelFailure(kind="not_configured", cause="the scripted model has no turn 2")
    log.decide(record_model_error, turn=claimed.turn, attempt=claimed.attempt, failure=failure,
               now=log.now)  # fmt: skip
    assert log.s.status is R.FAILED
    assert log.s.detail == (
        "acceptance failed (1 of 1 check: pytest -q exits 0: exit 1; stderr: E   assert 2 == 3); "
        "then: model request failed (turn 2): the scripted model has no turn 2; retrying cannot help"
    )


def test_a_run_out_of_turns_after_a_failed_acceptance_says_the_acceptance_first() -> None:
    log = failed_once(max_turns=2)
    do_model_turn(log, use("c1"))
    do_validate(log, "c1")
    do_claim(log, "c1")
    do_finish(log, "c1", Succeeded(output={}))
    log.decide(request_model, now=log.now, lease_s=LEASE_S)
    assert log.s.status is R.BUDGET_EXHAUSTED
    assert log.s.detail.startswith("acceptance failed (1 of 1 check: pytest -q exits 0: exit 1")
    assert "; then: " in log.s.detail


def test_a_cancelled_or_aborted_run_after_a_failed_acceptance_says_it_too() -> None:
    log = failed_once()
    do_cancel(log, by="carol")
    assert log.s.status is R.CANCELLED
    assert "; then: cancelled by carol" in log.s.detail
    assert log.s.detail.startswith("acceptance failed (")
    aborted = failed_once()
    aborted.append(RunEscalated(reason="repeated_failure", detail="3 identical failures"))
    assert aborted.s.detail == "3 identical failures"  # what the person answers, as it was
    aborted.append(RunAborted(by="bob", note="enough"))
    assert aborted.s.detail.endswith("; then: aborted by bob: enough")


def test_a_run_whose_last_acceptance_failed_tells_that_one_once() -> None:
    log = failed_once(max_turns=2)
    do_model_turn(log, text("done again"))
    events = do_accept(log, check(False, reason="exit 4"))
    assert isinstance(events[-1], RunFailed)
    assert (
        log.s.detail
        == events[-1].detail
        == "acceptance failed (1 of 1 check: pytest -q exits 0: exit 4)"
    )


def test_a_run_that_passes_acceptance_after_a_failed_one_completes_without_it() -> None:
    log = failed_once()
    do_model_turn(log, text("fixed"))
    do_accept(log, check(True))
    assert (log.s.status, log.s.detail) == (R.COMPLETED, "1 acceptance check passed")


def test_the_failed_acceptance_survives_a_snapshot() -> None:
    state = failed_once().s
    assert state.failed_acceptance is not None
    restored, _ = round_trip(state)
    assert restored.failed_acceptance == state.failed_acceptance


# ---- timeline lines -------------------------------------------------------------


def test_a_failed_checks_line_shows_its_exit_code_and_stderr_tail() -> None:
    failed = AcceptanceChecked(
        index=0, check="command 'python -m pytest -q' exits 0", passed=False,
        evidence=command_evidence(1, stderr=PYTEST_STDERR), checked_at=1.0,
    )  # fmt: skip
    told = line(envelope(failed, seq=5))
    assert told.endswith(
        "FAIL command 'python -m pytest -q' exits 0: exit 1; stderr: …>       assert add(1, 1) == 3 | E   assert 2 == 3"
    )


def test_a_passed_checks_line_says_pass_alone() -> None:
    passed = AcceptanceChecked(index=0, check="file 'a' exists", passed=True,
                               evidence={"size": 3}, checked_at=1.0)  # fmt: skip
    assert summary(passed) == "PASS file 'a' exists"


def test_a_write_answered_from_the_ledger_is_marked_and_a_run_one_is_not() -> None:
    replayed = ToolCallSucceeded(call_id="c19", output={"reserved": 2}, started_at=1.0,
                                 finished_at=1.001, replay_of="r-1.s0/c18/1")  # fmt: skip
    ran = replayed.model_copy(update={"replay_of": None})
    assert summary(replayed) == (
        'c19 answered from the ledger, not run again (done as r-1.s0/c18/1) -> {"reserved": 2}'
    )
    assert "ledger" not in summary(ran) and summary(ran).startswith("c19 in 1.0 ms")


# ---- a tool's exception ----------------------------------------------------------


def test_a_tools_traceback_goes_on_its_failed_call_and_not_to_the_model() -> None:
    log = Log.created()
    do_model_turn(log, use("c1"))
    do_validate(log, "c1")
    do_claim(log, "c1")
    error = ToolError(
        code="internal", message="ZeroDivisionError: division by zero", retryable=False
    )
    trace = 'Traceback (most recent call last):\n  File "t.py", line 3, in f\nZeroDivisionError: division by zero'
    [failed, *_] = do_finish(log, "c1", Errored(error, traceback=trace))
    assert isinstance(failed, ToolCallFailed) and failed.traceback == trace
    assert log.call("c1").error == error  # what the model is told: the one line


# ---- a second Ctrl-C -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (R.CANCELLING, "run r-1 is left cancelling (it was asked to cancel: it ends cancelled); "
                       "`agentledger run --attach r-1` goes on with it"),
        (R.RUNNING_TOOLS, "run r-1 is left running_tools; `agentledger run --attach r-1` goes on with it"),
    ],
)  # fmt: skip
def test_a_second_signal_tells_the_run_as_the_workers_left_it(status: RunStatus, said: str) -> None:
    # (a run that ended meanwhile is said as ended: tests/e2e/test_cli_attach.py)
    assert left("r-1", status, "agentledger run --attach r-1") == said
