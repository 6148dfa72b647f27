"""Recorded SSE transcripts (ours, in the shapes of the SDK's own fixtures:
server tools, citations, compaction, fallback, a refusal with stop_details, a
thinking block cut before its signature, a paused turn, blocks that do not
exist yet) played byte for byte through the real SDK: every block comes back
as the API sent it, and the next request sends it back the same."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentledger.schemas.content import (
    Message,
    ProviderBlock,
    TextBlock,
    ToolResultBlock,
    Usage,
    to_api,
)
from agentledger.schemas.spec import AnthropicSettings
from agentledger.services.adapters.models.anthropic_adapter import AnthropicAdapter
from agentledger.services.adapters.models.port import ModelRequest
from tests.standin.messages_api import TRANSCRIPTS, MessagesStandin, Streamed, Text, Transcript

KEY = "sk-ant-standin-0123456789"
TASK = Message(role="user", content=(TextBlock(text="When is high water on Thursday?"),))
NAMES = sorted(p.stem for p in TRANSCRIPTS.glob("*.sse"))


@pytest.fixture
def api() -> Iterator[MessagesStandin]:
    with MessagesStandin() as standin:
        yield standin


def adapter(api: MessagesStandin) -> AnthropicAdapter:
    settings = AnthropicSettings(model="claude-sonnet-5-5", max_tokens=2048)
    return AnthropicAdapter(settings, api_key=KEY, base_url=api.url)


def expected(name: str) -> list[dict[str, Any]]:
    return json.loads((TRANSCRIPTS / f"{name}.json").read_text())


def ask(*messages: Message) -> ModelRequest:
    return ModelRequest("run-1", len(messages), None, messages, ())


@pytest.mark.parametrize("name", NAMES)
def test_every_block_of_a_transcript_is_kept_as_the_api_sent_it(
    api: MessagesStandin, name: str
) -> None:
    api.play(Transcript.named(name))
    reply = adapter(api).respond(ask(TASK))
    assert [to_api(b) for b in reply.content] == expected(name)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "thinking_cut"])
def test_the_next_request_sends_every_block_back_byte_for_byte(
    api: MessagesStandin, name: str
) -> None:
    api.play(Transcript.named(name), Streamed((Text("ok"),)))
    model = adapter(api)
    reply = model.respond(ask(TASK))
    answers = tuple(
        ToolResultBlock(tool_use_id=b["id"], content="42")
        for b in expected(name)
        if b["type"] == "tool_use"
    ) or (TextBlock(text="Go on."),)
    model.respond(
        ask(
            TASK,
            Message(role="assistant", content=reply.content),
            Message(role="user", content=answers),
        )
    )
    sent = api.bodies()[1]["messages"][1]
    assert sent["role"] == "assistant"
    assert sent["content"] == expected(name)
    for block in expected(name):  # the same JSON text, whatever the key order
        assert json.dumps(block, sort_keys=True) in json.dumps(sent["content"], sort_keys=True)


def test_a_server_tool_turn_records_the_providers_blocks_and_its_usage(
    api: MessagesStandin,
) -> None:
    api.play(Transcript.named("web_search_citations"))
    reply = adapter(api).respond(ask(TASK))
    kinds = [b.type for b in reply.content]
    assert kinds == ["text", "server_tool_use", "web_search_tool_result", "text"]
    assert all(isinstance(b, ProviderBlock) for b in reply.content[1:3])
    cited = reply.content[3]
    assert isinstance(cited, TextBlock) and cited.citations and cited.citations[0]["url"]
    assert reply.usage == Usage(
        input_tokens=2140,
        output_tokens=96,
        cache_creation_input_tokens=1800,
        cache_creation_1h_input_tokens=600,
        server_tool_use={"web_search_requests": 1},
    )
    assert reply.stop_reason == "end_turn" and reply.stop_details is None


def test_a_refusal_comes_back_with_its_stop_details(api: MessagesStandin) -> None:
    api.play(Transcript.named("refusal_stop_details"))
    reply = adapter(api).respond(ask(TASK))
    assert reply.stop_reason == "refusal"
    assert reply.stop_details == {
        "type": "refusal",
        "category": "cyber",
        "explanation": "This request was refused due to policy.",
    }


def test_a_stop_sequence_is_recorded(api: MessagesStandin) -> None:
    api.play(Streamed((Text("A1: 3\n"),), stop_reason="stop_sequence", stop_sequence="###"))
    reply = adapter(api).respond(ask(TASK))
    assert (reply.stop_reason, reply.stop_sequence) == ("stop_sequence", "###")


def test_a_thinking_block_cut_before_its_signature_is_kept_with_an_empty_one(
    api: MessagesStandin,
) -> None:
    api.play(Transcript.named("thinking_cut"))
    reply = adapter(api).respond(ask(TASK))
    assert reply.stop_reason == "max_tokens"
    assert [to_api(b) for b in reply.content] == expected("thinking_cut")


def test_a_paused_continuation_is_sent_without_trailing_whitespace(api: MessagesStandin) -> None:
    api.play(Transcript.named("pause_turn_web_fetch"), Streamed((Text("done"),)))
    model = adapter(api)
    paused = model.respond(ask(TASK))
    assert paused.stop_reason == "pause_turn"
    text = Message(role="assistant", content=(TextBlock(text="Reading. \n"),))
    model.respond(ask(TASK, text))
    assert api.bodies()[1]["messages"][-1]["content"] == [{"type": "text", "text": "Reading."}]
