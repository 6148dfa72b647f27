"""What an MCP server may ask of a run during a call: a model answer (sampling)
only for a call still running, within the run's budget — its `max_tokens` cut
to the output tokens left, refused when cost or tokens would run over — and
recorded so the budget counts it; a question (elicitation) put to a person as
the run's escalation, which a reply answers and the run then goes on."""

from __future__ import annotations

import pytest
from runlog import RUN_ID, Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events import controls
from agentledger.events.errors import IllegalTransition
from agentledger.events.following import Until, reached
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.status import RunStatus
from agentledger.events.tool_requests import (
    ask_human,
    record_sample,
    sampling_refusal,
    sampling_tokens,
)
from agentledger.events.tool_step import TimedOut
from agentledger.schemas.content import TextBlock, Usage
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.adapters.models.replay import ReplayAdapter


def running(**spec_args: object) -> Log:
    log = Log.created(**spec_args)  # type: ignore[arg-type]
    do_model_turn(log, use("c1"), usage=Usage(input_tokens=100, output_tokens=20))
    do_validate(log, "c1")
    do_claim(log, "c1")
    return log


def sampled(call_id: str = "c1", out: int = 10) -> ToolSampledModel:
    return ToolSampledModel(
        call_id=call_id, server="ev", sample=1, prompt="[user] hi", max_tokens=50, text="hello",
        stop_reason="end_turn", model="claude-sonnet-4-5", usage=Usage(input_tokens=5, output_tokens=out),
    )  # fmt: skip


def test_a_sample_during_a_running_call_is_recorded_and_counted_in_the_budget() -> None:
    log = running()
    assert sampling_refusal(log.s, "c1", input_chars=40, max_tokens=50, now=log.now) is None
    log.decide(record_sample, sampled())
    assert (
        log.s.samples == 1 and log.s.usage.output_tokens == 30 and log.s.usage.input_tokens == 105
    )
    assert log.s.status is RunStatus.RUNNING_TOOLS
    [second] = record_sample(log.s, sampled())
    assert isinstance(second, ToolSampledModel) and second.sample == 2


def test_no_sample_is_answered_for_a_call_that_is_not_running_or_another_runs_call() -> None:
    log = running()
    assert "'c9' of run 'run-1' is not running" in str(
        sampling_refusal(log.s, "c9", input_chars=1, max_tokens=1, now=log.now)
    )
    assert record_sample(log.s, sampled("c9")) == []
    with pytest.raises(IllegalTransition, match="not running"):
        log.append(sampled("c9"))


def test_a_sample_is_cut_to_the_output_tokens_left_and_refused_when_none_are() -> None:
    log = running(budgets={"max_output_tokens": 60})
    assert sampling_tokens(log.s, asked=500, most=4096) == 40  # 20 of 60 used
    log.decide(record_sample, sampled(out=40))
    assert sampling_tokens(log.s, asked=500, most=4096) == 0
    why = sampling_refusal(log.s, "c1", input_chars=10, max_tokens=0, now=log.now)
    assert why == "the run has no output tokens left (60 of max_output_tokens 60 used)"


def test_a_sample_the_cost_budget_cannot_pay_for_is_refused_saying_so() -> None:
    prices = {"scripted": {"input": 3.0, "output": 15.0}}
    log = running(budgets={"max_cost_usd": 0.01, "prices": prices})
    assert sampling_refusal(log.s, "c1", input_chars=300, max_tokens=100, now=log.now) is None
    why = sampling_refusal(log.s, "c1", input_chars=30_000, max_tokens=4096, now=log.now)
    assert why is not None and why.startswith("cost: ") and "(limit $0.01)" in why, why


def test_a_question_during_a_call_waits_for_a_person_whose_reply_lets_the_run_go_on() -> None:
    log = running()
    [asked] = log.decide(ask_human, "c1", "MCP server 'ev' asks during call c1: your name?")
    assert log.s.status is RunStatus.AWAITING_HUMAN and log.s.escalated_for == "tool_question"
    assert not reached(Until.SETTLED, log.s)  # `run` goes on following: the call waits in it
    assert ask_human(log.s, "c1", "again?") == []  # one question at a time
    log.decide(controls.reply, by="ada", text='{"name": "Ada"}', escalation=log.s.escalation)
    assert log.s.status is RunStatus.RUNNING_TOOLS  # its call still runs
    assert ask_human(log.s, "c9", "whose?") == []


def test_a_follower_settles_on_a_tools_question_once_the_call_that_asked_has_ended() -> None:
    log = running()
    log.decide(ask_human, "c1", "MCP server 'ev' asks during call c1: your name?")
    assert not reached(Until.SETTLED, log.s)
    do_finish(log, "c1", TimedOut(after_s=30.0))  # nobody answered in the call's time
    assert log.s.status is RunStatus.AWAITING_HUMAN and reached(Until.SETTLED, log.s)


def test_a_replay_answers_the_nth_sampling_request_as_the_recorded_run_was_answered() -> None:
    log = running()
    log.decide(record_sample, sampled())
    replay = ReplayAdapter(RUN_ID, lambda: log.envelopes)

    def asked(n: int) -> ModelRequest:
        return ModelRequest("run-2", 1, None, (), (), tenant="acme", max_tokens=50, sample=n)

    reply = replay.respond(asked(1))
    assert reply.content == (TextBlock(text="hello"),) and reply.usage.output_tokens == 10
    with pytest.raises(ModelError, match="no model reply for sampling request 2"):
        replay.respond(asked(2))
