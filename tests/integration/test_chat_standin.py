"""The Chat Completions stand-in (tests/standin/chat_completions.py) driven
through the real `openai` SDK: its vLLM and Ollama streams, a completion that
does not stream, HTTP errors, mid-stream failures, and the requests the SDK
sent, as recorded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from tests.standin.chat_completions import (
    MODEL,
    NOTHING_LEFT,
    Call,
    Chat,
    ChatStandin,
    Failed,
    Hangup,
    cut,
)

KEY = "sk-standin-0123456789"
ASK: list[Any] = [{"role": "user", "content": "When is high water on Thursday?"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} of a port",
            "parameters": {"type": "object", "properties": {"port": {"type": "string"}}},
        },
    }
    for name in ("tides", "weather")
]


@pytest.fixture
def api() -> Iterator[ChatStandin]:
    with ChatStandin() as standin:
        yield standin


@pytest.fixture
def client(api: ChatStandin) -> Iterator[openai.OpenAI]:
    # trust_env=False: a proxy in the environment must not catch the loopback calls
    http_client = openai.DefaultHttpxClient(trust_env=False, timeout=5)
    with openai.OpenAI(api_key=KEY, base_url=api.url, max_retries=0, http_client=http_client) as c:
        yield c


def stream(client: openai.OpenAI, **kwargs: Any) -> list[ChatCompletionChunk]:
    chunks = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=TOOLS, stream=True, **kwargs
    )
    return list(chunks)


def calls_of(chunks: list[ChatCompletionChunk]) -> dict[int, dict[str, str]]:
    """The tool calls of a stream, put together by index as a client does."""
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or ():
                call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += tc.id or ""
                if tc.function is not None:
                    call["name"] += tc.function.name or ""
                    call["arguments"] += tc.function.arguments or ""
    return calls


def extra(chunks: list[ChatCompletionChunk], key: str) -> str:
    """A field the SDK does not know (reasoning_content, reasoning), from each delta's extras."""
    return "".join(
        (c.delta.model_extra or {}).get(key) or "" for chunk in chunks for c in chunk.choices
    )


def test_a_vllm_stream_of_two_parallel_calls_comes_together_with_its_usage(
    client: openai.OpenAI, api: ChatStandin
) -> None:
    api.play(
        Chat(
            "Looking.",
            (Call("tides", {"port": "Brest"}), Call("weather", {"port": "Brest"}, id="w-1")),
            reasoning="Two lookups, side by side.",
            cached_tokens=5,
        )
    )
    chunks = stream(client, stream_options={"include_usage": True})
    calls = calls_of(chunks)
    assert re.fullmatch(r"chatcmpl-tool-[0-9a-f]{32}", calls[0]["id"])
    assert calls == {
        0: {"id": calls[0]["id"], "name": "tides", "arguments": '{"port": "Brest"}'},
        1: {"id": "w-1", "name": "weather", "arguments": '{"port": "Brest"}'},
    }
    assert "".join(c.delta.content or "" for ch in chunks for c in ch.choices) == "Looking."
    assert extra(chunks, "reasoning_content") == "Two lookups, side by side."
    assert [c.finish_reason for c in chunks[-2].choices] == ["tool_calls"]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (12, 7)
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == 5
    assert all(ch.usage is None for ch in chunks[:-1])
    assert {ch.id for ch in chunks} == {"chatcmpl-standin-0001"}


def test_an_ollama_stream_has_whole_calls_stop_and_no_usage(
    client: openai.OpenAI, api: ChatStandin
) -> None:
    api.play(
        Chat(
            reasoning="Tides first.",
            calls=(Call("tides", {"port": "Brest"}), Call("weather", {})),
            flavour="ollama",
        )
    )
    chunks = stream(client, stream_options={"include_usage": True})
    whole = [tc for ch in chunks for c in ch.choices for tc in c.delta.tool_calls or ()]
    assert [(tc.index, tc.function and tc.function.arguments) for tc in whole] == [
        (0, '{"port": "Brest"}'),
        (1, "{}"),
    ]
    assert all(re.fullmatch(r"call_[a-z0-9]{8}", tc.id or "") for tc in whole)
    assert extra(chunks, "reasoning") == "Tides first."
    assert extra(chunks, "reasoning_content") == ""
    assert [c.finish_reason for c in chunks[-1].choices] == ["stop"]
    assert all(ch.usage is None and ch.choices for ch in chunks)


def test_a_completion_that_does_not_stream_is_one_message(
    client: openai.OpenAI, api: ChatStandin
) -> None:
    api.play(Chat("High water at 06:12.", (Call("tides", "", id=""),), reasoning="Easy."))
    reply = client.chat.completions.create(model=MODEL, messages=ASK, tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "High water at 06:12."
    assert (choice.message.model_extra or {}).get("reasoning_content") == "Easy."
    [call] = choice.message.tool_calls or []
    assert call.type == "function"
    assert (call.id, call.function.name, call.function.arguments) == ("", "tides", "")
    assert reply.usage is not None and reply.usage.total_tokens == 19
    assert reply.id == "chatcmpl-standin-0001" and reply.model == MODEL


def test_a_rate_limit_is_the_sdks_rate_limit_error(client: openai.OpenAI, api: ChatStandin) -> None:
    api.play(Failed(429, "Slow down", type="rate_limit_error", code="rate_limited", retry_after=2))
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model=MODEL, messages=ASK)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.code == "rate_limited" and caught.value.type == "rate_limit_error"
    assert caught.value.body == {
        "message": "Slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limited",
    }


def test_the_requests_are_recorded_as_the_sdk_sent_them(
    client: openai.OpenAI, api: ChatStandin
) -> None:
    api.play(Chat("Hello."), Chat("Again."))
    stream(client, stream_options={"include_usage": True})
    client.chat.completions.create(model=MODEL, messages=ASK, temperature=0)
    assert [m.id for m in client.models.list().data] == [MODEL]
    first, second = api.bodies()[:2]
    assert first["model"] == MODEL and first["messages"] == ASK and first["tools"] == TOOLS
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert "stream" not in second and second["temperature"] == 0
    assert [(r.method, r.path) for r in api.requests] == [
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    ]
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_streams_that_break_cut_or_stop_short(client: openai.OpenAI, api: ChatStandin) -> None:
    error = {"message": "engine died", "type": "InternalServerError", "code": 500}
    api.play(
        Chat("Let me", error=error),
        Chat("Half a", finish_reason=None),
        cut(None, (Call("tides", {"port": "Brest"}, id="", cut_at=7),)),
        Hangup(),
    )
    with pytest.raises(openai.APIError, match="engine died") as caught:
        stream(client)
    assert caught.value.body == error
    dropped = stream(client)  # no finish_reason, no [DONE]: the SDK just stops
    assert all(c.finish_reason is None for ch in dropped for c in ch.choices)
    chunks = stream(client)
    assert calls_of(chunks) == {0: {"id": "", "name": "tides", "arguments": '{"port"'}}
    assert [c.finish_reason for c in chunks[-1].choices] == ["length"]
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model=MODEL, messages=ASK)
    with pytest.raises(openai.BadRequestError, match=NOTHING_LEFT):
        client.chat.completions.create(model=MODEL, messages=ASK)
