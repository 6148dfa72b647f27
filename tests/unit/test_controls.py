"""What people and other systems say to a run: cancel, reply, resume, abort
(approve and deny are in test_approvals). A control that does not fit the run's
state is refused with ControlRefused naming the run and why, and nothing is
appended. A reply or resume tells the model about writes whose outcome is
unknown, and the run resumes where its calls are."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from journeys import JOURNEYS, NOT_FOUND, reach
from runlog import RUN_ID, Log, do_claim, do_finish, do_model_turn, do_validate, text, use

from agentledger.events import controls
from agentledger.events.conversation import messages
from agentledger.events.errors import ControlRefused
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import Errored, TimedOut
from agentledger.events.types import (
    HumanReplied,
    RunAborted,
    RunCancelRequested,
    RunEscalated,
    RunResumed,
    ToolCallFailed,
)
from agentledger.schemas.content import TextBlock, ToolResultBlock

R, C = RunStatus, CallStatus
Control = Callable[..., list[Any]]
FOR_A_PERSON: dict[str, tuple[Control, dict[str, Any]]] = {
    "reply": (controls.reply, {"by": "dana", "text": "try y", "escalation": 0}),
    "resume": (controls.resume, {"by": "dana", "escalation": 0}),
    "abort": (controls.abort, {"by": "dana", "escalation": 0}),
}


@pytest.mark.parametrize(
    "journey",
    [
        "happy_path",
        "model_error",
        "turns_exhausted",
        "late_after_timeout",
        "reply_after_cancel",
    ],
)
def test_an_ended_run_cannot_be_cancelled(journey: str) -> None:
    log = JOURNEYS[journey][0]()
    with pytest.raises(ControlRefused) as err:
        controls.cancel(log.s, by="carol", source="cli")
    assert err.value.run_id == RUN_ID
    assert err.value.reason == f"cannot cancel a run that is {log.s.status}"
    assert repr(RUN_ID) in str(err.value)
    assert not err.value.retryable


def test_a_run_already_cancelling_cannot_be_cancelled_again() -> None:
    with pytest.raises(ControlRefused, match="cannot cancel a run that is cancelling"):
        controls.cancel(reach(R.CANCELLING).s, by="carol", source="inbox")


@pytest.mark.parametrize("status", [*(s for s in R if s.live), R.AWAITING_APPROVAL])
@pytest.mark.parametrize("what", sorted(FOR_A_PERSON))
def test_only_a_run_waiting_for_a_person_takes_a_reply_resume_or_abort(
    what: str, status: RunStatus
) -> None:
    control, args = FOR_A_PERSON[what]
    with pytest.raises(ControlRefused) as err:
        control(reach(status).s, **args)
    assert err.value.reason == f"cannot {what}: the run is {status}, not awaiting_human"


@pytest.mark.parametrize("what", sorted(FOR_A_PERSON))
def test_an_ended_run_takes_no_reply_resume_or_abort(what: str) -> None:
    control, args = FOR_A_PERSON[what]
    with pytest.raises(ControlRefused, match="the run is completed, not awaiting_human"):
        control(JOURNEYS["happy_path"][0]().s, **args)


@pytest.mark.parametrize("words", ["", "  \n"])
def test_a_reply_without_words_is_refused(words: str) -> None:
    s = reach(R.AWAITING_HUMAN).s
    with pytest.raises(ControlRefused, match="a reply needs some text"):
        controls.reply(s, by="dana", text=words, escalation=s.escalation or 0)


def test_a_cancel_is_recorded_with_who_asked_where_and_why() -> None:
    events = controls.cancel(reach(R.RUNNING_TOOLS).s, by="carol", source="inbox", reason="oops")
    assert events == [RunCancelRequested(by="carol", source="inbox", reason="oops")]


def test_an_abort_fails_the_run_saying_who_ended_it() -> None:
    log = reach(R.AWAITING_HUMAN)
    assert log.decide(controls.abort, by="dana", escalation=log.s.escalation, note="enough") == [
        RunAborted(by="dana", note="enough")
    ]
    assert log.s.status is R.FAILED
    assert log.s.detail == "aborted by dana: enough"


def test_a_reply_goes_to_the_model_as_text_after_the_turn() -> None:
    log = reach(R.AWAITING_HUMAN)  # the model refused
    assert log.decide(
        controls.reply, by="dana", escalation=log.s.escalation, text="it is allowed here"
    ) == [HumanReplied(by="dana", text="it is allowed here")]
    assert log.s.status is R.REQUESTING_MODEL
    assert log.s.detail == ""
    last = messages(log.s)[-1]
    assert last.role == "user"
    assert last.content == (TextBlock(text="dana says: it is allowed here"),)


def test_a_reply_follows_the_tool_results_of_the_turn() -> None:
    log = JOURNEYS["repeated_failure_then_reply"][0]()
    last = messages(log.s)[-1]
    assert [type(b) for b in last.content] == [ToolResultBlock, TextBlock]
    assert last.content[-1] == TextBlock(text="dana says: the file is called y")


def test_a_resume_appends_no_words_for_the_model() -> None:
    log = reach(R.AWAITING_HUMAN)
    before = messages(log.s)
    assert log.decide(controls.resume, by="dana", escalation=log.s.escalation, note="retry") == [
        RunResumed(by="dana", note="retry")
    ]
    assert messages(log.s) == before
    assert log.s.status is R.REQUESTING_MODEL


def unknown_write_with_a_read_left() -> Log:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"), use("r", path="x"))
    do_validate(log, "w")
    do_validate(log, "r")
    do_claim(log, "w")
    [_, escalated] = do_finish(log, "w", TimedOut(after_s=10.0))
    assert isinstance(escalated, RunEscalated) and escalated.reason == "outcome_unknown"
    return log


@pytest.mark.parametrize("what", ["reply", "resume"])
def test_a_write_whose_outcome_is_unknown_is_told_to_the_model_as_exactly_that(what: str) -> None:
    log = unknown_write_with_a_read_left()
    control, args = FOR_A_PERSON[what]
    events = log.decide(control, **{**args, "escalation": log.s.escalation})
    told, answered = events
    assert isinstance(told, ToolCallFailed) and told.call_id == "w"
    assert told.error.code == "outcome_unknown" and not told.error.retryable
    assert (
        told.error.message == "the outcome is unknown: it may have happened; dana let the run go on"
    )
    assert isinstance(answered, HumanReplied if what == "reply" else RunResumed)
    assert log.call("w").status is C.FAILED
    # the run resumes where its calls are: the read has yet to run
    assert log.s.status is R.RUNNING_TOOLS
    do_claim(log, "r")
    do_finish(log, "r", Errored(NOT_FOUND))
    result = messages(log.s)[-1].content[0]
    assert isinstance(result, ToolResultBlock) and result.tool_use_id == "w" and result.is_error
    assert json.loads(result.content)["error"]["code"] == "outcome_unknown"  # type: ignore[arg-type]


def test_after_a_reply_to_an_unknown_write_with_nothing_left_the_model_is_asked() -> None:
    log = JOURNEYS["write_timed_out"][0]()
    log.decide(controls.reply, by="dana", escalation=log.s.escalation, text="it did write")
    assert log.s.status is R.REQUESTING_MODEL


def test_a_reply_to_a_run_escalated_before_any_turn_is_refused() -> None:
    """Nothing to reply to: the model has not spoken (resume or abort answer it)."""
    log = Log.created()
    log.append(RunEscalated(reason="refusal", detail="look first"))
    with pytest.raises(ControlRefused, match="the model has not spoken yet: resume or abort"):
        controls.reply(log.s, by="dana", escalation=log.s.escalation, text="go")
    assert [type(e) for e in controls.resume(log.s, by="dana", escalation=log.s.escalation)] == [
        RunResumed
    ]


def test_a_reply_to_a_refusal_restarts_the_conversation_after_it() -> None:
    log = reach(R.AWAITING_HUMAN)
    log.decide(controls.reply, by="dana", escalation=log.s.escalation, text="please go on")
    do_model_turn(log, text("done"))
    roles = [m.role for m in messages(log.s)]
    assert roles == ["user", "assistant", "user", "assistant"]
