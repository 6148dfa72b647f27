"""The Responses API's wire mapping, both ways: a reasoning model's reasoning items
are kept verbatim and go back with every later request (a stateless request
without them is refused by the API), tool outputs follow their calls, every status
maps to one stop reason, and a call cut by `max_output_tokens` never runs."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.schemas.content import (
    Message,
    ProviderBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.schemas.openai_spec import OpenAISettings
from agentledger.services.adapters.models.failures import Incomplete
from agentledger.services.adapters.models.openai_responses import (
    REASONING_ITEM,
    EventLog,
    request_body,
    to_items,
    to_reply,
)
from agentledger.services.adapters.models.openai_wire import speaks_responses
from agentledger.services.adapters.models.port import ModelError, ModelRequest

REQUEST = ModelRequest("run-1", 2, None, (), ())
THOUGHT = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc-1"}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_a",
    "name": "read",
    "arguments": '{"path": "x"}',
    "status": "completed",
}
SAID = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
}


def ended(status: str, output: list[dict[str, Any]], **response: Any) -> EventLog:
    log = EventLog()
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 9}
    log.see(
        {
            "type": f"response.{status}",
            "response": {
                "id": "resp_1",
                "model": "gpt-x",
                "status": status,
                "output": output,
                "usage": usage,
                **response,
            },
        }
    )
    return log


def test_reasoning_text_and_calls_are_kept_in_order_with_the_items_verbatim() -> None:
    reply = to_reply(ended("completed", [THOUGHT, SAID, CALL]), REQUEST)
    assert reply.stop_reason == "tool_use"
    assert reply.content == (
        ProviderBlock(type=REASONING_ITEM, item=THOUGHT),
        TextBlock(text="Reading."),
        ToolUseBlock(id="call_a", name="read", input={"path": "x"}, item_id="fc_1"),
    )
    assert (
        reply.usage.input_tokens,
        reply.usage.cache_read_input_tokens,
        reply.usage.output_tokens,
    ) == (36, 64, 9)
    assert reply.stop_details == {"status": "completed", "id": "resp_1"}


def test_the_reasoning_items_go_back_verbatim_and_outputs_right_after_their_calls() -> None:
    reply = to_reply(ended("completed", [THOUGHT, SAID, CALL]), REQUEST)
    turn = Message(role="assistant", content=reply.content)
    answer = Message(
        role="user",
        content=(
            ToolResultBlock(tool_use_id="call_a", content="no such file", is_error=True),
            TextBlock(text="Try again."),
        ),
    )
    assert to_items(turn) + to_items(answer) == [
        THOUGHT,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "read",
            "arguments": '{"path": "x"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "Error: no such file"},
        {"role": "user", "content": "Try again."},
    ]


@pytest.mark.parametrize(
    ("status", "output", "details", "stop"),
    [
        ("completed", [SAID], None, "end_turn"),
        ("completed", [CALL], None, "tool_use"),
        (
            "completed",
            [{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}],
            None,
            "refusal",
        ),
        ("incomplete", [SAID], {"reason": "max_output_tokens"}, "max_tokens"),
        ("incomplete", [SAID], {"reason": "content_filter"}, "refusal"),
    ],
)
def test_every_status_maps_to_one_stop_reason(
    status: str, output: list[dict[str, Any]], details: Any, stop: str
) -> None:
    assert to_reply(ended(status, output, incomplete_details=details), REQUEST).stop_reason == stop


def test_a_call_cut_by_the_output_limit_never_runs() -> None:
    cut = {**CALL, "arguments": '{"pa', "status": "incomplete"}
    reply = to_reply(
        ended("incomplete", [cut], incomplete_details={"reason": "max_output_tokens"}), REQUEST
    )
    assert reply.truncated_tool_use_ids == ("call_a",)
    assert reply.truncated_tool_json == (("call_a", '{"pa'),)


def test_a_stream_whose_end_never_came_keeps_what_its_deltas_brought_and_is_incomplete() -> None:
    log = EventLog()
    log.see(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**CALL, "arguments": "", "status": "in_progress"},
        }
    )
    log.see(
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"path"'}
    )
    assert log.output() == [{**CALL, "arguments": '{"path"', "status": "incomplete"}]
    with pytest.raises(Incomplete):
        to_reply(log, REQUEST)


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "rate_limit_exceeded", "message": "slow"},
                },
            },
            "rate_limited",
        ),
        (
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {"code": "server_error", "message": "oops"},
                },
            },
            "server_error",
        ),
        ({"type": "error", "code": "server_error", "message": "broke"}, "server_error"),
        (
            {"type": "response.completed", "response": {"status": "queued", "output": []}},
            "malformed_reply",
        ),
        (
            {
                "type": "response.completed",
                "response": {
                    "status": "completed",
                    "output": [{"type": "function_call", "arguments": "{}"}],
                },
            },
            "malformed_reply",
        ),
    ],
)
def test_a_failed_response_is_a_classified_model_error(event: dict[str, Any], kind: str) -> None:
    log = EventLog()
    log.see(event)
    with pytest.raises(ModelError) as raised:
        to_reply(log, REQUEST)
    assert raised.value.failure.kind == kind


def test_the_request_is_stateless_asks_for_the_encrypted_reasoning_and_caps_the_output() -> None:
    settings = OpenAISettings(
        model="gpt-5", max_tokens=500, system="be brief", reasoning_effort="low"
    )
    body = request_body(
        settings,
        ModelRequest(
            "run-1", 1, "task rules", (Message(role="user", content=(TextBlock(text="go"),)),), ()
        ),
    )
    assert body == {
        "model": "gpt-5",
        "input": [{"role": "user", "content": "go"}],
        "max_output_tokens": 500,
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "instructions": "be brief\n\ntask rules",
        "reasoning": {"effort": "low"},
    }


def test_openai_itself_speaks_the_responses_api_and_every_other_server_chat_completions() -> None:
    assert speaks_responses(OpenAISettings(model="m"))
    assert not speaks_responses(OpenAISettings(model="m", base_url="http://127.0.0.1:8000/v1"))
    assert speaks_responses(
        OpenAISettings(model="m", base_url="http://127.0.0.1:8000/v1", api="responses")
    )
    assert not speaks_responses(OpenAISettings(model="m", api="chat"))
