"""Claude's replies by the book: a refusal's stop_details are recorded and said;
a fallback model named in the spec gets the refused request once, without the
refused turn, and serves the rest of the run; server tool uses are the
provider's, never proposed to our executor; a tool_use stop whose only call is
a server tool still under way asks again."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from runlog import LEASE_S, T0, Log, do_model_turn, do_tools, text, use

from agentledger.events.context_view import assemble, canonical
from agentledger.events.model_step import record_model_reply, request_model, requested_model
from agentledger.events.status import RunStatus
from agentledger.events.types import (
    ModelRequested,
    ModelResponded,
    RunEscalated,
    RunFailed,
    ToolCallProposed,
)
from agentledger.schemas.content import ContentBlock, ProviderBlock

R = RunStatus
OPUS = {"anthropic": {"model": "claude-fable-5-2", "max_tokens": 1000}}
WITH_FALLBACK = {"anthropic": {**OPUS["anthropic"], "fallback_model": "claude-opus-5-5"}}
DETAILS = {"type": "refusal", "category": "cyber", "explanation": "Refused due to policy."}
BLOCK: TypeAdapter[ContentBlock] = TypeAdapter(ContentBlock)


def refuse(log: Log, *content: ContentBlock, details: dict[str, Any] | None = None) -> list[Any]:
    claimed = log.decide(request_model, now=log.now + 1, lease_s=LEASE_S)[0]
    assert isinstance(claimed, ModelRequested)
    return log.decide(
        record_model_reply,
        turn=claimed.turn,
        attempt=claimed.attempt,
        content=content or (text("I can't help with that."),),
        stop_reason="refusal",
        usage=ModelResponded.model_fields["usage"].default,
        model="claude-fable-5-2",
        stop_details=DETAILS if details is None else details,
    )


def test_a_refusal_records_its_stop_details_and_the_escalation_says_why() -> None:
    log = Log.created(model=OPUS)
    events = refuse(log)
    responded, escalated = events
    assert isinstance(responded, ModelResponded) and responded.stop_details == DETAILS
    assert isinstance(escalated, RunEscalated)
    assert (
        escalated.detail == "the model refused at turn 1 (category 'cyber': Refused due to policy.)"
    )
    assert log.s.status is R.AWAITING_HUMAN


def test_a_refusal_that_fails_the_run_names_the_category_too() -> None:
    log = Log.created(model=OPUS, policies={"on_refusal": "fail"})
    [_, failed] = refuse(log)
    assert isinstance(failed, RunFailed) and "category 'cyber'" in failed.detail


def test_a_fallback_model_gets_the_refused_request_without_the_refused_turn() -> None:
    log = Log.created(model=WITH_FALLBACK)
    do_model_turn(log, use("a", path="x"))
    do_tools(log)
    before = assemble(log.s)
    assert requested_model(log.s) == "claude-fable-5-2"
    events = refuse(log, text("I won't."), use("b", path="y"))
    assert not any(isinstance(e, RunEscalated) for e in events)
    assert log.s.status is R.REQUESTING_MODEL  # the refused call answered, not run
    [again] = log.decide(request_model, now=log.now + 1, lease_s=LEASE_S)
    assert isinstance(again, ModelRequested) and again.model == "claude-opus-5-5"
    after = assemble(log.s)
    assert after.messages == before.messages  # the same request as the one refused
    assert [d.action for d in after.decisions] == ["withdrawn"]
    assert "I won't." not in canonical(after.system, after.tools, after.messages)


def test_after_a_fallback_refuses_too_a_person_is_asked() -> None:
    log = Log.created(model=WITH_FALLBACK)
    refuse(log)
    events = refuse(log)
    assert isinstance(events[-1], RunEscalated) and log.s.status is R.AWAITING_HUMAN
    assert requested_model(log.s) == "claude-opus-5-5"  # the fallback stays


SEARCH = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "tides"}}
RESULT = {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []}


def test_server_tool_uses_are_kept_and_never_proposed_to_our_executor() -> None:
    log = Log.created(model=OPUS)
    blocks = [BLOCK.validate_python(b) for b in (SEARCH, RESULT)]
    events = do_model_turn(log, *blocks, text("High water at 06:42."), stop="end_turn")
    assert not any(isinstance(e, ToolCallProposed) for e in events)
    assert log.s.status is R.ACCEPTING
    assert all(isinstance(b, ProviderBlock) for b in log.s.turns[0].content[:2])


def test_a_tool_use_stop_with_only_a_server_tool_under_way_asks_again() -> None:
    log = Log.created(model=OPUS)
    events = do_model_turn(log, BLOCK.validate_python(SEARCH), stop="tool_use")
    assert not any(isinstance(e, RunFailed) for e in events)
    assert log.s.status is R.REQUESTING_MODEL


def test_a_tool_use_stop_without_any_tool_use_is_still_a_protocol_error() -> None:
    log = Log.created(model=OPUS)
    events = do_model_turn(
        log, BLOCK.validate_python(SEARCH), BLOCK.validate_python(RESULT), stop="tool_use"
    )
    assert isinstance(events[-1], RunFailed) and events[-1].reason == "model_protocol"


def test_a_paused_server_turn_is_continued_within_the_turn_budget() -> None:
    log = Log.created(model=OPUS, max_turns=2)
    do_model_turn(log, BLOCK.validate_python(SEARCH), stop="pause_turn")
    do_model_turn(log, BLOCK.validate_python(SEARCH), stop="pause_turn")
    [ended] = log.decide(request_model, now=T0 + 5, lease_s=LEASE_S)
    assert ended.type == "RunBudgetExhausted" and ended.budget == "turns"
