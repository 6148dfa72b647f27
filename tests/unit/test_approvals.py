"""Approvals: a valid call whose tool needs a person is recorded as
ApprovalRequested and waits (the run awaits approval); a grant lets it run; a
denial, or a request nobody answers before it expires, goes back to the model
as an error result and the tool never runs."""

from __future__ import annotations

import json

import pytest
from journeys import WALL_CLOCK_S, reach
from runlog import RUN_ID, T0, Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events import controls
from agentledger.events.conversation import messages, tool_result
from agentledger.events.dispatch import due_commands
from agentledger.events.errors import ControlRefused
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import Succeeded, claim_call
from agentledger.events.types import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ToolCallStarted,
)

R, C = RunStatus, CallStatus
ASK = "writes outside the workspace need a person"


def asked(*, timeout_s: float | None = None, writes: tuple[str, ...] = ()) -> Log:
    policies = {"approval_timeout_s": timeout_s} if timeout_s else {}
    log = Log.created(policies=policies)
    do_model_turn(log, use("w", "write_file", path="/etc/hosts"))
    do_validate(log, "w", needs_approval=ASK, writes=writes, now=T0 + 5)
    return log


def test_a_call_that_needs_approval_waits_for_a_person() -> None:
    log = asked(writes=("file:/etc/hosts",))
    [requested] = [e for e in log.envelopes if e.type == "ApprovalRequested"]
    assert requested.data == ApprovalRequested(
        call_id="w",
        read_only=False,
        writes=("file:/etc/hosts",),
        timeout_s=10.0,
        expires_at=T0 + 5 + 3600,
        reason=ASK,
    )
    assert log.s.status is R.AWAITING_APPROVAL
    assert log.call("w").status is C.AWAITING_APPROVAL
    assert due_commands(log.s, now=T0 + 10) == []
    assert claim_call(log.s, "w", worker="w", now=T0 + 10) == []


def test_the_request_expires_after_the_specs_approval_timeout() -> None:
    assert asked(timeout_s=60).call("w").approval_expires_at == T0 + 5 + 60


def test_a_granted_call_runs() -> None:
    log = asked()
    events = log.decide(controls.approve, "w", by="bob", note="go ahead")
    assert events == [ApprovalGranted(call_id="w", by="bob", note="go ahead")]
    assert log.call("w").status is C.VALIDATED
    assert log.s.status is R.RUNNING_TOOLS
    [started] = log.decide(claim_call, "w", worker="w1", now=T0 + 6)
    assert isinstance(started, ToolCallStarted)
    do_finish(log, "w", Succeeded(output="written"))
    assert log.s.status is R.REQUESTING_MODEL


def test_a_denied_call_never_runs_and_the_model_is_told_why() -> None:
    log = asked()
    events = log.decide(controls.deny, "w", by="bob", note="not that file")
    assert events == [ApprovalDenied(call_id="w", by="bob", note="not that file")]
    call = log.call("w")
    assert call.status is C.REJECTED and call.attempts == 0
    assert claim_call(log.s, "w", worker="w1", now=T0 + 6) == []
    assert log.s.status is R.REQUESTING_MODEL
    result = messages(log.s)[-1].content[0]
    assert result == tool_result(call) and result.is_error  # type: ignore[union-attr]
    error = json.loads(result.content)["error"]  # type: ignore[union-attr,arg-type]
    assert error == {
        "code": "permission_denied",
        "message": "denied by bob: not that file; the tool did not run",
        "retryable": False,
    }


def test_no_request_expires_before_its_time() -> None:
    log = asked()
    assert on_tick(log.s, now=T0 + 5 + 3600 - 0.001) == []


def test_an_unanswered_request_is_denied_when_it_expires() -> None:
    log = asked()
    events = log.decide(on_tick, now=T0 + 5 + 3600)
    assert events == [
        ApprovalDenied(call_id="w", by="agentledger", note="no answer in time", expired=True)
    ]
    assert log.call("w").status is C.REJECTED
    assert log.call("w").error.message == (  # type: ignore[union-attr]
        "the approval request expired: no answer in time; the tool did not run"
    )
    assert log.s.status is R.REQUESTING_MODEL
    assert on_tick(log.s, now=T0 + 10_000) == []


def test_only_the_requests_that_expired_are_denied() -> None:
    log = Log.created()
    do_model_turn(log, use("a", "write_file", path="a"), use("b", "write_file", path="b"))
    do_validate(log, "a", needs_approval=ASK, now=T0)
    do_validate(log, "b", needs_approval=ASK, now=T0 + 100)
    [denied] = log.decide(on_tick, now=T0 + 3600)
    assert denied.call_id == "a"  # type: ignore[union-attr]
    assert log.s.status is R.AWAITING_APPROVAL
    log.decide(controls.approve, "b", by="bob")
    assert log.s.status is R.RUNNING_TOOLS


def test_other_calls_of_the_turn_wait_until_the_approval_is_decided() -> None:
    log = Log.created()
    do_model_turn(log, use("r", path="x"), use("w", "write_file", path="y"))
    do_validate(log, "r")
    do_validate(log, "w", needs_approval=ASK)
    assert claim_call(log.s, "r", worker="w1", now=T0) == []
    log.decide(controls.approve, "w", by="bob")
    do_claim(log, "r")
    do_claim(log, "w")


@pytest.mark.parametrize("answer", [controls.approve, controls.deny])
def test_an_answer_for_an_unknown_call_is_refused(answer: object) -> None:
    log = asked()
    with pytest.raises(ControlRefused) as err:
        answer(log.s, "nope", by="bob")  # type: ignore[operator]
    assert err.value.run_id == RUN_ID
    assert err.value.reason == "no call 'nope' in the current turn"
    assert not err.value.retryable


@pytest.mark.parametrize("answer", [controls.approve, controls.deny])
def test_a_call_is_answered_only_once(answer: object) -> None:
    log = asked()
    log.decide(controls.approve, "w", by="bob")
    with pytest.raises(ControlRefused) as err:
        answer(log.s, "w", by="eve")  # type: ignore[operator]
    assert err.value.reason == "cannot answer for call 'w': the run is running_tools"


def test_an_expired_request_cannot_be_approved_any_more() -> None:
    log = asked()
    log.decide(on_tick, now=T0 + 5 + 3600)
    with pytest.raises(ControlRefused) as err:
        controls.approve(log.s, "w", by="bob")
    assert err.value.reason == "cannot answer for call 'w': the run is requesting_model"


def timed_out_while_asking() -> Log:
    log = reach(R.AWAITING_APPROVAL)
    log.decide(on_tick, now=T0 + WALL_CLOCK_S)
    assert log.s.status is R.TIMEOUT
    return log


def asking_while_validating() -> Log:
    log = Log.created()
    do_model_turn(log, use("a", "write_file", path="y"), use("b"))
    do_validate(log, "a", needs_approval=ASK)
    assert log.s.status is R.VALIDATING
    return log


def test_an_answer_to_a_run_that_timed_out_is_refused() -> None:
    log = timed_out_while_asking()
    with pytest.raises(ControlRefused) as err:
        controls.approve(log.s, "a", by="bob")
    assert err.value.reason == "cannot answer for call 'a': the run is timeout"


def test_a_call_may_be_approved_while_the_turn_s_other_calls_are_validated() -> None:
    log = asking_while_validating()
    log.decide(controls.approve, "a", by="bob")
    assert (log.s.status, log.s.call("a").status) == (R.VALIDATING, CallStatus.VALIDATED)
