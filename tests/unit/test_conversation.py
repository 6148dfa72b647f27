"""The conversation the model is shown: the task, each turn verbatim, and every
tool_use answered by a tool_result with the same id in the next user message,
in proposal order, errors marked as errors. Roles alternate: replies that were
paused or cut off and then continued merge into one assistant message."""

from __future__ import annotations

import json

from journeys import JOURNEYS
from runlog import (
    LEASE_S,
    T0,
    Log,
    assert_every_tool_use_is_answered_in_order,
    assert_roles_alternate,
    check,
    do_accept,
    do_claim,
    do_finish,
    do_model_turn,
    do_validate,
    text,
    use,
)

from agentledger.events.conversation import messages
from agentledger.events.model_step import request_model
from agentledger.events.status import RunStatus
from agentledger.events.tool_step import Errored, Succeeded, TimedOut
from agentledger.events.types import FieldError, ToolError
from agentledger.schemas.content import Message, TextBlock, ToolResultBlock


def mixed_turn() -> Log:
    """One turn whose calls end every way a call can end, finished out of order."""
    log = Log.created()
    do_model_turn(
        log,
        text("let me look"),
        use("ok", path="a"),
        use("bad_args"),
        use("missing", "no_such_tool"),
        use("broken", path="b"),
        use("slow", path="c"),
    )
    do_validate(log, "missing")
    do_validate(log, "bad_args", field_errors=[FieldError(loc="path", msg="Field required")])
    for call_id in ("slow", "broken", "ok"):
        do_validate(log, call_id)
    for call_id in ("slow", "broken", "ok"):
        do_claim(log, call_id)
    do_finish(log, "slow", TimedOut(after_s=5.0))
    error = ToolError(code="not_found", message="no b", retryable=False)
    do_finish(log, "broken", Errored(error))
    do_finish(log, "ok", Succeeded(output={"text": "hello"}))
    assert log.s.status is RunStatus.REQUESTING_MODEL
    return log


def test_the_conversation_starts_with_the_task() -> None:
    assert messages(Log.created().s) == (
        Message(role="user", content=(TextBlock(text="fix the failing test"),)),
    )


def test_every_tool_use_is_answered_in_the_next_user_message_in_proposal_order() -> None:
    log = mixed_turn()
    conversation = messages(log.s)
    assert [m.role for m in conversation] == ["user", "assistant", "user"]
    assert conversation[1].content == log.s.current_turn.content  # type: ignore[union-attr]
    assert_every_tool_use_is_answered_in_order(conversation)


def test_results_of_failed_and_rejected_calls_are_errors() -> None:
    results = {b.tool_use_id: b for b in messages(mixed_turn().s)[2].content}  # type: ignore[union-attr]
    assert {i for i, b in results.items() if b.is_error} == {
        "bad_args",
        "missing",
        "broken",
        "slow",
    }
    assert json.loads(results["ok"].content) == {"text": "hello"}  # type: ignore[union-attr]
    bad_args = json.loads(results["bad_args"].content)["error"]  # type: ignore[union-attr]
    assert bad_args["code"] == "invalid_arguments"
    assert bad_args["fields"] == [{"loc": "path", "msg": "Field required"}]
    missing = json.loads(results["missing"].content)["error"]  # type: ignore[union-attr]
    assert missing["code"] == "unknown_tool" and "fields" not in missing


def test_a_string_output_is_passed_on_verbatim() -> None:
    log = Log.created()
    do_model_turn(log, use("a"))
    do_validate(log, "a")
    do_claim(log, "a")
    do_finish(log, "a", Succeeded(output="line 1\nline 2"))
    [result] = messages(log.s)[-1].content
    assert result == ToolResultBlock(tool_use_id="a", content="line 1\nline 2")


def test_a_turn_with_calls_still_running_has_no_reply_yet() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"))
    do_validate(log, "a")
    do_validate(log, "b")
    do_claim(log, "a")
    do_finish(log, "a", Succeeded(output=1))
    assert [m.role for m in messages(log.s)] == ["user", "assistant"]


def test_acceptance_feedback_follows_the_turn_that_ended_as_text() -> None:
    log = Log.created()
    do_model_turn(log, text("all done"))
    do_accept(log, check(False, reason="3 tests failed"))
    last = messages(log.s)[-1]
    assert last.role == "user"
    [feedback] = last.content
    assert isinstance(feedback, TextBlock) and "3 tests failed" in feedback.text


def test_the_conversation_of_several_turns_keeps_every_turn_in_order() -> None:
    log = mixed_turn()
    do_model_turn(log, use("again", path="d"))
    do_validate(log, "again")
    do_claim(log, "again")
    do_finish(log, "again", Succeeded(output="d"))
    log.decide(request_model, now=T0 + LEASE_S, lease_s=LEASE_S)
    conversation = messages(log.s)
    assert [m.role for m in conversation] == ["user", "assistant", "user", "assistant", "user"]
    assert_every_tool_use_is_answered_in_order(conversation)


def test_a_paused_turn_and_its_continuation_are_one_assistant_message() -> None:
    log = Log.created()
    do_model_turn(log, text("looking"), stop="pause_turn")
    do_model_turn(log, text("done"))
    conversation = messages(log.s)
    assert [m.role for m in conversation] == ["user", "assistant"]
    assert conversation[1].content == (text("looking"), text("done"))


def test_a_reply_cut_off_at_max_tokens_is_continued_in_the_same_assistant_message() -> None:
    log = Log.created(max_turns=4)
    do_model_turn(log, text("part one"), stop="max_tokens")
    do_model_turn(log, text("part two"), use("a", path="x"))
    do_validate(log, "a")
    do_claim(log, "a")
    do_finish(log, "a", Succeeded(output="x"))
    log.decide(request_model, now=log.now, lease_s=LEASE_S)
    conversation = messages(log.s)
    assert [m.role for m in conversation] == ["user", "assistant", "user"]
    assert conversation[1].content == (text("part one"), text("part two"), use("a", path="x"))
    assert_roles_alternate(conversation)
    assert_every_tool_use_is_answered_in_order(conversation)


def test_calls_cut_off_at_max_tokens_are_answered_with_errors() -> None:
    log = JOURNEYS["paused_then_cut_off_then_going_on"][0]()
    conversation = messages(log.s)
    assert_roles_alternate(conversation)
    assert_every_tool_use_is_answered_in_order(conversation)
    [result] = conversation[-1].content
    assert isinstance(result, ToolResultBlock) and result.is_error
    assert "cut off by max_tokens" in json.loads(result.content)["error"]["message"]  # type: ignore[arg-type]


def test_roles_alternate_in_every_journeys_conversation() -> None:
    for build, _ in JOURNEYS.values():
        assert_roles_alternate(messages(build().s))
