"""Given a run's events, when the model worker decides, then these events (or
none: a step already done or claimed by a live worker is not repeated). Every
stop reason is handled its own way; max_tokens and refusal as the spec says."""

from __future__ import annotations

from runlog import (
    LEASE_S,
    T0,
    Log,
    assert_every_tool_use_is_answered_in_order,
    do_model_turn,
    do_request,
    do_tools,
    text,
    use,
)

from agentledger.events import controls
from agentledger.events.conversation import messages
from agentledger.events.dispatch import due_commands
from agentledger.events.model_retry import ModelFailure
from agentledger.events.model_step import record_model_error, record_model_reply, request_model
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import claim_call
from agentledger.events.types import (
    ModelRequested,
    ModelResponded,
    RunBudgetExhausted,
    RunEscalated,
    RunFailed,
    ToolCallProposed,
    ToolCallRejected,
)
from agentledger.schemas.content import Usage

R, C = RunStatus, CallStatus


def test_requesting_the_model_claims_the_next_turn_until_a_deadline() -> None:
    log = Log.created()
    events = log.decide(request_model, now=T0, lease_s=LEASE_S)
    assert events == [ModelRequested(turn=1, attempt=1, deadline_at=T0 + LEASE_S)]


def test_a_live_model_claim_blocks_a_second_request() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    assert request_model(log.s, now=T0 + LEASE_S - 0.001, lease_s=LEASE_S) == []


def test_a_model_claim_past_its_deadline_is_claimed_again_with_the_next_attempt() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    deadline = T0 + LEASE_S
    events = log.decide(request_model, now=deadline, lease_s=LEASE_S)
    assert events == [ModelRequested(turn=1, attempt=2, deadline_at=deadline + LEASE_S)]


def test_request_model_returns_nothing_once_the_model_replied() -> None:
    log = Log.created()
    do_model_turn(log, use("a"))
    assert request_model(log.s, now=T0 + 10 * LEASE_S, lease_s=LEASE_S) == []


def test_recording_the_same_reply_twice_appends_it_once() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    reply = dict(
        turn=1, attempt=1, content=[text("done")], stop_reason="end_turn", usage=Usage(), model="m"
    )
    assert len(log.decide(record_model_reply, **reply)) == 1
    assert record_model_reply(log.s, **reply) == []  # type: ignore[arg-type]


def test_a_late_reply_from_an_expired_claim_is_ignored() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    log.decide(request_model, now=T0 + LEASE_S, lease_s=LEASE_S)  # attempt 2
    late = record_model_reply(
        log.s,
        turn=1,
        attempt=1,
        content=[text("late")],
        stop_reason="end_turn",
        usage=Usage(),
        model="m",
    )
    assert late == []


def test_a_tool_use_reply_proposes_each_call_in_order() -> None:
    log = Log.created()
    events = do_model_turn(log, text("let me look"), use("b", path="2"), use("a", path="1"))
    assert isinstance(events[0], ModelResponded)
    proposed = [(e.call_id, e.turn, e.name, e.input) for e in events[1:]]  # type: ignore[union-attr]
    assert proposed == [("b", 1, "read_file", {"path": "2"}), ("a", 1, "read_file", {"path": "1"})]
    assert log.s.status is R.VALIDATING


def test_a_tool_use_reply_without_a_tool_use_block_fails_the_run() -> None:
    log = Log.created()
    events = do_model_turn(log, text("hmm"), stop="tool_use")
    assert events[-1] == RunFailed(
        reason="model_protocol", detail="stop_reason tool_use without any tool_use block"
    )
    assert log.s.status is R.FAILED


def test_duplicate_tool_use_ids_fail_the_run() -> None:
    log = Log.created()
    events = do_model_turn(log, use("a"), use("a"))
    assert events[-1] == RunFailed(reason="model_protocol", detail="duplicate tool_use ids ['a']")


def test_an_end_turn_reply_moves_the_run_to_acceptance() -> None:
    log = Log.created()
    do_model_turn(log, text("done"))
    assert log.s.status is R.ACCEPTING


def test_a_reply_cut_off_at_max_tokens_goes_on_by_default() -> None:
    log = Log.created()
    events = do_model_turn(log, text("and then"), stop="max_tokens")
    assert [type(e) for e in events] == [ModelResponded]
    assert log.s.status is R.REQUESTING_MODEL
    assert do_request(log).turn == 2


def test_calls_in_a_reply_cut_off_at_max_tokens_are_recorded_and_never_run() -> None:
    log = Log.created()
    events = do_model_turn(
        log,
        text("writing both"),
        use("a", "write_file", path="a"),
        use("b", "write_file", path="b"),
        stop="max_tokens",
        truncated=["b"],
    )
    assert [type(e) for e in events] == [
        ModelResponded,
        ToolCallProposed,
        ToolCallProposed,
        ToolCallRejected,
        ToolCallRejected,
    ]
    a, b = (e.error for e in events[3:])  # type: ignore[union-attr]
    assert a.code == b.code == "invalid_arguments" and a.retryable and b.retryable
    assert a.message == (
        "not executed: the reply it came in was cut off by max_tokens; send the call again in full"
    )
    assert b.message.startswith("not executed: its input was cut off by max_tokens")
    assert log.s.status is R.REQUESTING_MODEL
    assert [c.status for c in log.s.current_turn.calls] == [C.REJECTED, C.REJECTED]  # type: ignore[union-attr]
    assert claim_call(log.s, "a", worker="w", now=T0) == []


def test_a_reply_cut_off_at_max_tokens_fails_the_run_when_the_spec_says_so() -> None:
    log = Log.created(policies={"on_max_tokens": "fail"})
    events = do_model_turn(log, text("and then"), use("a"), stop="max_tokens")
    assert [type(e) for e in events] == [ModelResponded, RunFailed]
    assert events[-1].reason == "model_max_tokens"  # type: ignore[union-attr]
    assert "'max_tokens' at turn 1" in events[-1].detail  # type: ignore[union-attr]
    assert log.s.status is R.FAILED


def test_a_paused_turn_is_continued() -> None:
    log = Log.created()
    assert [type(e) for e in do_model_turn(log, text("hm"), stop="pause_turn")] == [ModelResponded]
    assert log.s.status is R.REQUESTING_MODEL
    assert do_request(log).turn == 2


def test_a_paused_turn_with_calls_runs_them() -> None:
    log = Log.created()
    events = do_model_turn(log, use("a"), stop="pause_turn")
    assert [type(e) for e in events] == [ModelResponded, ToolCallProposed]
    assert log.s.status is R.VALIDATING


def test_a_refusal_goes_to_a_human_by_default() -> None:
    log = Log.created()
    events = do_model_turn(log, text("I cannot help with that"), stop="refusal")
    assert events[1:] == [RunEscalated(reason="refusal", detail="the model refused at turn 1")]
    assert log.s.status is R.AWAITING_HUMAN
    assert due_commands(log.s, now=T0 + 1e6) == []


def test_a_refusal_fails_the_run_when_the_spec_says_so() -> None:
    log = Log.created(policies={"on_refusal": "fail"})
    events = do_model_turn(log, text("I cannot help with that"), stop="refusal")
    assert isinstance(events[-1], RunFailed) and events[-1].reason == "model_refusal"
    assert log.s.status is R.FAILED


def test_a_tool_use_in_a_refused_reply_is_answered_when_the_run_resumes() -> None:
    log = Log.created()
    do_model_turn(log, text("I will not"), use("a", "write_file", path="y"), stop="refusal")
    log.decide(controls.resume, by="dana", escalation=log.s.escalation)
    do_request(log)
    assert_every_tool_use_is_answered_in_order(messages(log.s))


def test_a_reply_past_the_context_window_fails_the_run() -> None:
    log = Log.created()
    events = do_model_turn(log, text("hm"), stop="model_context_window_exceeded")
    assert isinstance(events[-1], RunFailed)
    assert events[-1].reason == "model_model_context_window_exceeded"
    assert log.s.status is R.FAILED


def test_a_stop_sequence_moves_the_run_to_acceptance() -> None:
    log = Log.created()
    do_model_turn(log, text("DONE"), stop="stop_sequence")
    assert log.s.status is R.ACCEPTING


def test_a_model_error_fails_the_run_with_the_apis_words_once() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    too_long = ModelFailure(
        "invalid_request", "request refused (400 invalid_request_error): prompt is too long"
    )
    events = log.decide(record_model_error, turn=1, attempt=1, failure=too_long, now=T0)
    assert events[1:] == [
        RunFailed(
            reason="model_error",
            detail=f"model request failed (turn 1): {too_long.cause}; retrying cannot help",
        )
    ]
    assert record_model_error(log.s, turn=1, attempt=1, failure=too_long, now=T0) == []


def test_a_model_request_past_max_turns_exhausts_the_turn_budget() -> None:
    log = Log.created(max_turns=1)
    do_model_turn(log, use("a"), use("b"))
    do_tools(log)
    [exhausted] = log.decide(request_model, now=T0, lease_s=LEASE_S)
    assert isinstance(exhausted, RunBudgetExhausted)
    assert (exhausted.budget, exhausted.used, exhausted.limit) == ("turns", 1, 1)
    assert exhausted.detail == (
        "turns: 1 of 1 turn used; done so far: 1 turn, 2 of 2 tool calls succeeded"
    )
    assert log.s.status is R.BUDGET_EXHAUSTED
    assert request_model(log.s, now=T0, lease_s=LEASE_S) == []


def test_usage_adds_up_over_turns() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), usage=Usage(input_tokens=10, output_tokens=2))
    do_tools(log)
    do_model_turn(log, text("done"), usage=Usage(input_tokens=30, output_tokens=5))
    assert log.s.usage == Usage(input_tokens=40, output_tokens=7)
    assert log.s.turns_used == 2
