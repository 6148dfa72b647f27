"""The Chat Completions wire mapping, both ways, on the chunks servers send: a
reply is rebuilt into the log's own blocks whatever the server's known
differences, every finish_reason maps to one of our stop reasons (an unknown one
is a malformed reply, never a guess), a call cut by `length` is marked never to
run, and the log's messages go out as the API wants them (tool answers right
after their calls, in order)."""

from __future__ import annotations

import json
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
from agentledger.schemas.spec import ToolSpec
from agentledger.services.adapters.models.failures import Incomplete
from agentledger.services.adapters.models.openai_wire import (
    ChunkLog,
    request_params,
    to_reply,
    to_wire,
)
from agentledger.services.adapters.models.port import ModelError, ModelRequest

REQUEST = ModelRequest("run-1", 3, None, (), (), context_tokens=40)


def chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    return {
        "id": "c-1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **top,
    }


def replay(*chunks: dict[str, Any]) -> ChunkLog:
    log = ChunkLog()
    for c in chunks:
        log.see(c)
    return log


def call(
    index: int, *, id: str | None = None, name: str | None = None, args: Any = None
) -> dict[str, Any]:
    part: dict[str, Any] = {"index": index, "function": {}}
    if id is not None:
        part["id"] = id
    if name is not None:
        part["function"]["name"] = name
    if args is not None:
        part["function"]["arguments"] = args
    return {"tool_calls": [part]}


def test_fragments_of_parallel_calls_are_put_together_by_index() -> None:
    log = replay(
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "think "}),
        chunk({"reasoning_content": "twice"}),
        chunk({"content": "Looking."}),
        chunk(call(0, id="a", name="read", args="")),
        chunk(call(1, id="b", name="read", args='{"pa')),
        chunk(call(0, args='{"path": "x"}')),
        chunk(call(1, args='th": "y"}')),
        chunk({}, "tool_calls"),
        {
            "id": "c-1",
            "model": "m",
            "choices": [],
            "usage": {
                "prompt_tokens": 50,
                "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 32},
            },
        },
    )
    reply = to_reply(log, REQUEST)
    assert reply.stop_reason == "tool_use"
    assert reply.content == (
        ProviderBlock(type="reasoning", field="reasoning_content", text="think twice"),  # type: ignore[call-arg]
        TextBlock(text="Looking."),
        ToolUseBlock(id="a", name="read", input={"path": "x"}),
        ToolUseBlock(id="b", name="read", input={"path": "y"}),
    )
    assert (
        reply.usage.input_tokens,
        reply.usage.cache_read_input_tokens,
        reply.usage.output_tokens,
    ) == (18, 32, 9)
    assert reply.truncated_tool_use_ids == ()
    assert reply.stop_details == {"finish_reason": "tool_calls", "id": "c-1"}


@pytest.mark.parametrize(
    ("finish", "calls", "stop"),
    [
        ("stop", False, "end_turn"),
        ("stop", True, "tool_use"),  # older Ollama says stop with calls
        ("tool_calls", True, "tool_use"),
        ("function_call", True, "tool_use"),
        ("length", False, "max_tokens"),
        ("content_filter", False, "refusal"),
    ],
)
def test_every_finish_reason_maps_to_one_stop_reason(finish: str, calls: bool, stop: str) -> None:
    parts = [chunk(call(0, id="a", name="t", args="{}"))] if calls else [chunk({"content": "hi"})]
    assert to_reply(replay(*parts, chunk({}, finish)), REQUEST).stop_reason == stop


def test_an_unknown_finish_reason_is_a_malformed_reply_and_no_finish_is_an_incomplete_stream() -> (
    None
):
    with pytest.raises(ModelError) as raised:
        to_reply(replay(chunk({"content": "hi"}, "eos_token")), REQUEST)
    assert raised.value.failure.kind == "malformed_reply"
    with pytest.raises(Incomplete):
        to_reply(replay(chunk({"content": "hi"})), REQUEST)
    with pytest.raises(Incomplete):
        to_reply(ChunkLog(), REQUEST)


def test_a_refusal_is_kept_as_its_own_block_and_stops_as_a_refusal() -> None:
    reply = to_reply(replay(chunk({"refusal": "I can't"}), chunk({}, "stop")), REQUEST)
    assert reply.stop_reason == "refusal"
    assert reply.content == (ProviderBlock(type="refusal", refusal="I can't"),)  # type: ignore[call-arg]


@pytest.mark.parametrize("cut", ['{"path": "x', "", '["not", "an object"]'])
def test_a_call_cut_by_length_is_marked_never_to_run(cut: str) -> None:
    log = replay(
        chunk(call(0, id="a", name="read", args='{"path": "x"}')),
        chunk(call(1, id="b", name="write", args=cut)),
        chunk({}, "length"),
    )
    reply = to_reply(log, REQUEST)
    assert reply.stop_reason == "max_tokens"
    assert reply.truncated_tool_use_ids == ("b",)
    assert reply.truncated_tool_json == (("b", cut),)
    assert reply.content[0] == ToolUseBlock(id="a", name="read", input={"path": "x"})


def test_a_call_with_no_arguments_sent_as_an_empty_string_is_a_call_with_none() -> None:
    reply = to_reply(
        replay(chunk(call(0, id="a", name="run_tests", args="")), chunk({}, "tool_calls")), REQUEST
    )
    assert reply.content == (ToolUseBlock(id="a", name="run_tests", input={}),)
    assert reply.truncated_tool_use_ids == ()


def test_arguments_a_server_sent_as_an_object_are_taken_as_they_are() -> None:
    reply = to_reply(
        replay(chunk(call(0, id="a", name="t", args={"n": 1})), chunk({}, "tool_calls")), REQUEST
    )
    assert reply.content == (ToolUseBlock(id="a", name="t", input={"n": 1}),)


def test_missing_and_repeated_call_ids_are_made_up_and_the_sent_ones_kept() -> None:
    log = replay(
        chunk(call(0, id="", name="a", args="{}")),
        chunk(call(1, id="x", name="b", args="{}")),
        chunk(call(2, id="x", name="c", args="{}")),
        chunk({}, "tool_calls"),
    )
    ids = [(b.id, (b.model_extra or {}).get("wire_id")) for b in to_reply(log, REQUEST).content]
    assert ids == [("call_3_0", ""), ("x", None), ("call_3_2", "x")]


def test_a_call_without_a_name_is_a_malformed_reply() -> None:
    with pytest.raises(ModelError) as raised:
        to_reply(replay(chunk(call(0, id="a", args="{}")), chunk({}, "tool_calls")), REQUEST)
    assert raised.value.failure.kind == "malformed_reply"


def test_a_stream_without_usage_is_estimated_and_says_so() -> None:
    reply = to_reply(replay(chunk({"content": "x" * 40}), chunk({}, "stop")), REQUEST)
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (40, 10)
    assert reply.stop_details is not None and reply.stop_details["usage_estimated"] is True


def test_choices_other_than_the_first_are_not_mixed_in() -> None:
    other = {
        "id": "c-1",
        "model": "m",
        "choices": [{"index": 1, "delta": {"content": "NO"}, "finish_reason": None}],
    }
    reply = to_reply(replay(chunk({"content": "yes"}), other, chunk({}, "stop")), REQUEST)
    assert reply.content == (TextBlock(text="yes"),)


def test_tool_answers_go_right_after_their_calls_and_the_feedback_after_them() -> None:
    assistant = Message(
        role="assistant",
        content=(
            ProviderBlock(type="reasoning", field="reasoning_content", text="hmm"),  # type: ignore[call-arg]
            TextBlock(text="Two reads."),
            ToolUseBlock(id="a", name="read", input={"path": "ü"}),
            ToolUseBlock(id="b", name="read", input={}),
        ),
    )
    user = Message(
        role="user",
        content=(
            ToolResultBlock(tool_use_id="a", content="one"),
            ToolResultBlock(tool_use_id="b", content="no such file", is_error=True),
            TextBlock(text="Checks failed."),
        ),
    )
    sent = to_wire(assistant) + to_wire(user)
    assert sent == [
        {
            "role": "assistant",
            "content": "Two reads.",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "ü"}'},
                },
                {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "Error: no such file"},
        {"role": "user", "content": "Checks failed."},
    ]
    assert to_wire(assistant, send_reasoning=True)[0]["reasoning_content"] == "hmm"


def test_the_request_asks_for_usage_names_the_output_limit_as_the_server_reads_it() -> None:
    settings = OpenAISettings(
        model="m", max_tokens=99, system="be brief", temperature=0.2, parallel_tool_calls=False
    )
    tool = ToolSpec(
        name="read", description="Read a file.", input_schema={"type": "object"}, read_only=True
    )
    request = ModelRequest(
        "run-1",
        1,
        "the task's system",
        (Message(role="user", content=(TextBlock(text="go"),)),),
        (tool,),
    )
    params = request_params(settings, request, base_url="http://127.0.0.1:8000/v1")
    assert params["messages"][0] == {"role": "system", "content": "be brief\n\nthe task's system"}
    assert (params["max_tokens"], params["stream"], params["stream_options"]) == (
        99,
        True,
        {"include_usage": True},
    )
    assert params["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "parameters": {"type": "object"},
                "description": "Read a file.",
            },
        }
    ]
    assert (params["temperature"], params["parallel_tool_calls"]) == (0.2, False)
    own = request_params(settings, request, base_url="https://api.openai.com/v1")
    assert own["max_completion_tokens"] == 99 and "max_tokens" not in own
    assert json.dumps(params)  # plain JSON: what `context --json` shows as sent
