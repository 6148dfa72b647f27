"""The anthropic adapter through the real SDK, against the local stand-in of
the Messages API. No Redis; no connection may leave the loopback interface.
One request per attempt: every failure comes back classified (its kind says
whether a later attempt may get past it) with its cause in one line.

`make test-floors` runs this file with the oldest and the newest anthropic SDK
the pin allows (tests/integration/test_sdk_floors.py)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import socket
from collections.abc import Callable, Iterator
from typing import Any, get_args

import pytest

from agentledger.events.model_retry import ModelFailure
from agentledger.events.types import StopReason
from agentledger.schemas.content import (
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from agentledger.schemas.spec import AnthropicModel, AnthropicSettings, ToolSpec
from agentledger.services.adapters.models.anthropic_adapter import AnthropicAdapter
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.bootstrap import model_for
from agentledger.services.settings import from_env
from tests.standin.messages_api import (
    MODEL,
    Failed,
    Hangup,
    MessagesStandin,
    RedactedThinking,
    Streamed,
    Text,
    Thinking,
    ToolUse,
    cut,
    mid_stream_error,
)

KEY = "sk-ant-standin-0123456789"
TASK = Message(role="user", content=(TextBlock(text="Count the stock."),))
READ = ToolSpec(
    name="read_stock",
    description="Read one stock level.",
    input_schema={"type": "object", "properties": {"sku": {"type": "string"}}},
    read_only=True,
)


@pytest.fixture(autouse=True)
def connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket connects to; anything off loopback is refused."""
    seen: list[Any] = []
    real = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> None:
        seen.append(address)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            if not ipaddress.ip_address(address[0]).is_loopback:
                raise OSError(f"a test tried to reach {address!r}")
        real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return seen


@pytest.fixture
def api() -> Iterator[MessagesStandin]:
    with MessagesStandin() as standin:
        yield standin


Make = Callable[..., AnthropicAdapter]


@pytest.fixture
def make(api: MessagesStandin) -> Make:
    def adapter(**settings: Any) -> AnthropicAdapter:
        model = AnthropicSettings(**{"model": "claude-test", "max_tokens": 64_000, **settings})
        return AnthropicAdapter(model, api_key=KEY, base_url=api.url)

    return adapter


def sent_key(headers: dict[str, str]) -> str | None:
    """The key a request carried: SDK 2.x sends `Authorization: Bearer`, 1.x `x-api-key`."""
    bearer = headers.get("authorization", "")
    return (
        bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else headers.get("x-api-key")
    )


def ask(*messages: Message, tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest("run-1", len(messages), "Be brief.", messages or (TASK,), tools)


def test_a_text_reply_comes_back_with_its_usage_and_exact_model_id(
    api: MessagesStandin, make: Make
) -> None:
    usage = {"input_tokens": 120, "output_tokens": 9}
    usage |= {"cache_read_input_tokens": 30, "cache_creation_input_tokens": 45}
    api.play(Streamed((Text("There are 42 widgets."),), model="claude-x-20250101", usage=usage))
    reply = make().respond(ask())
    assert reply.content == (TextBlock(text="There are 42 widgets."),)
    assert reply.stop_reason == "end_turn"
    assert reply.model == "claude-x-20250101"
    assert reply.usage == Usage(**usage)
    assert reply.retries == () and reply.truncated_tool_use_ids == ()


def test_a_watcher_is_told_the_replys_text_as_it_streams(api: MessagesStandin, make: Make) -> None:
    api.play(Streamed((Text("There are 42 widgets."),)))
    pieces: list[str] = []
    reply = make().respond(dataclasses.replace(ask(), watch=pieces.append))
    assert "".join(pieces) == "There are 42 widgets." and pieces
    assert reply.content == (TextBlock(text="There are 42 widgets."),)


def test_the_request_carries_system_tools_and_thinking_and_streams(
    api: MessagesStandin, make: Make
) -> None:
    api.play(Streamed((Text("ok"),)))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    make(system="You audit stock.", thinking=thinking, prompt_cache="off").respond(
        ask(tools=(READ,))
    )
    (body,) = api.bodies()
    assert body["model"] == "claude-test" and body["max_tokens"] == 64_000
    assert body["stream"] is True and "temperature" not in body
    assert body["system"] == "You audit stock.\n\nBe brief."
    assert body["thinking"] == thinking
    assert body["tools"] == [
        {"name": READ.name, "description": READ.description, "input_schema": READ.input_schema}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Count the stock."}]}
    ]


def test_a_temperature_is_refused_before_anything_is_sent(api: MessagesStandin, make: Make) -> None:
    with pytest.raises(ModelError, match="temperature") as raised:
        make(temperature=0.2).respond(ask())
    assert raised.value.retryable is False and api.requests == []


def test_parallel_tool_uses_come_back_with_their_ids_and_whole_inputs(
    api: MessagesStandin, make: Make
) -> None:
    first = {"sku": "A1", "note": 'naïve "quoted" {brace}', "n": [1, 2.5, None]}
    api.play(
        Streamed(
            (
                Text("Reading both."),
                ToolUse("toolu_01", "read_stock", first),
                ToolUse("toolu_02", "read_stock", {}),
            ),
            stop_reason="tool_use",
        )
    )
    reply = make().respond(ask(tools=(READ,)))
    assert reply.stop_reason == "tool_use"
    assert reply.content[1:] == (
        ToolUseBlock(id="toolu_01", name="read_stock", input=first),
        ToolUseBlock(id="toolu_02", name="read_stock", input={}),
    )
    assert reply.truncated_tool_use_ids == ()


def test_thinking_blocks_go_back_byte_for_byte_with_the_tool_results(
    api: MessagesStandin, make: Make
) -> None:
    thought = 'Stock A1…\nlet me check — twice.\t"quoted" \\ backslash'
    signature = "EqQBCkgIARABGAIiQL+/sig==" * 8
    api.play(
        Streamed(
            (
                Thinking(thought, signature),
                RedactedThinking("EmwKAhgBEgy3va3pzix/LafPsn4a"),
                ToolUse("toolu_07", "read_stock", {"sku": "A1"}),
            ),
            stop_reason="tool_use",
        ),
        Streamed((Text("A1 has 42."),)),
    )
    adapter = make(thinking={"type": "enabled", "budget_tokens": 1024})
    first = adapter.respond(ask(tools=(READ,)))
    assert first.content[0] == ThinkingBlock(thinking=thought, signature=signature)
    assert first.content[1] == RedactedThinkingBlock(data="EmwKAhgBEgy3va3pzix/LafPsn4a")
    result = ToolResultBlock(tool_use_id="toolu_07", content="42")
    history = (
        TASK,
        Message(role="assistant", content=first.content),
        Message(role="user", content=(result,)),
    )
    adapter.respond(ask(*history, tools=(READ,)))
    sent = api.bodies()[1]["messages"]
    assert sent[1]["content"] == [
        {"type": "thinking", "thinking": thought, "signature": signature},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "tool_use", "id": "toolu_07", "name": "read_stock", "input": {"sku": "A1"}},
    ]
    assert sent[2]["content"][0]["tool_use_id"] == "toolu_07"
    assert json.dumps(signature).encode() in api.requests[1].raw


@pytest.mark.parametrize("stop", get_args(StopReason))
def test_every_stop_reason_comes_back_as_itself(
    api: MessagesStandin, make: Make, stop: str
) -> None:
    sequence = "###" if stop == "stop_sequence" else None
    api.play(Streamed((Text("I can't help with that."),), stop_reason=stop, stop_sequence=sequence))
    reply = make().respond(ask())
    assert reply.stop_reason == stop
    assert reply.content == (TextBlock(text="I can't help with that."),)


def test_a_max_tokens_cut_inside_a_tool_calls_json_marks_that_call_truncated(
    api: MessagesStandin, make: Make
) -> None:
    whole = {"sku": "A1"}
    cut_input = {"path": "/srv/stock/ledger.csv", "rows": [1, 2, 3]}
    # cut after `[1, 2`: a partial-mode parse (the SDK's snapshot) reads rows=[1, 2]
    at = json.dumps(cut_input).index("2,") + 1
    calls = (ToolUse("toolu_a", "read_stock", whole), ToolUse("toolu_b", "write", cut_input, at))
    api.play(cut(calls))
    reply = make().respond(ask(tools=(READ,)))
    assert reply.stop_reason == "max_tokens"
    assert reply.content == (
        ToolUseBlock(id="toolu_a", name="read_stock", input=whole),
        ToolUseBlock(id="toolu_b", name="write", input={}),
    )
    assert reply.truncated_tool_use_ids == ("toolu_b",)
    assert reply.truncated_tool_json == (("toolu_b", json.dumps(cut_input)[:at]),)


def test_a_max_tokens_cut_before_any_tool_json_marks_the_call_truncated(
    api: MessagesStandin, make: Make
) -> None:
    api.play(cut((Text("Writing."), ToolUse("toolu_c", "write", {"x": 1}, cut_at=0))))
    reply = make().respond(ask())
    assert reply.truncated_tool_use_ids == ("toolu_c",)
    assert reply.content[1] == ToolUseBlock(id="toolu_c", name="write", input={})


def failure(adapter: AnthropicAdapter, request: ModelRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as raised:
        adapter.respond(request or ask())
    return raised.value


def test_a_429_is_rate_limited_with_the_wait_the_api_asked_for(
    api: MessagesStandin, make: Make
) -> None:
    api.play(Failed(429, "rate_limit_error", "Too many tokens per minute", retry_after=7))
    error = failure(make())
    assert error.failure == ModelFailure(
        "rate_limited", "rate limited (429 rate_limit_error): Too many tokens per minute", 429, 7.0
    )
    assert error.retryable is True


def test_the_sdk_sends_one_request_and_never_retries_on_its_own(
    api: MessagesStandin, make: Make
) -> None:
    api.play(Failed(529, "overloaded_error", "Overloaded"), Streamed((Text("late"),)))
    error = failure(make())
    assert (error.failure.kind, str(error)) == (
        "overloaded",
        "overloaded (529 overloaded_error): Overloaded",
    )
    assert error.retryable is True
    assert len(api.requests) == 1
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0"]
    assert make().respond(ask()).content == (TextBlock(text="late"),), (
        "the next attempt is the log's"
    )


@pytest.mark.parametrize(
    ("reply", "kind", "cause"),
    [
        (Failed(500, "api_error", "Internal server error"), "server_error",
         "server error (500 api_error): Internal server error"),
        (Failed(503, "api_error", "Unavailable"), "server_error", "server error (503 api_error): Unavailable"),
        (mid_stream_error(), "overloaded", "overloaded_error mid-stream: Overloaded"),
        (mid_stream_error("api_error", "Internal"), "server_error", "api_error mid-stream: Internal"),
        (Streamed((Text("partial"),), drop=True), "stream_broken",
         "the stream ended before the message was complete"),
    ],
)  # fmt: skip
def test_a_server_error_or_a_broken_stream_is_one_a_later_attempt_may_get_past(
    api: MessagesStandin, make: Make, reply: Any, kind: str, cause: str
) -> None:
    api.play(reply)
    error = failure(make())
    assert (error.failure.kind, str(error), error.retryable) == (kind, cause, True)
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("status", "kind", "message", "ours", "what"),
    [
        (400, "invalid_request_error", "messages.1: tool_use ids were found without tool_result blocks",
         "invalid_request", "request refused"),
        (401, "authentication_error", "invalid x-api-key", "authentication", "authentication failed"),
        (403, "permission_error", "this key may not use claude-test", "permission", "permission denied"),
        (404, "not_found_error", "model: claude-test", "not_found", "not found"),
        (413, "request_too_large", "request exceeds the maximum size", "request_too_large",
         "request too large"),
    ],
)  # fmt: skip
def test_a_4xx_retrying_cannot_help_is_said_with_the_apis_message(
    api: MessagesStandin, make: Make, status: int, kind: str, message: str, ours: str, what: str
) -> None:
    api.play(Failed(status, kind, message))
    error = failure(make())
    assert error.failure == ModelFailure(ours, f"{what} ({status} {kind}): {message}", status)  # type: ignore[arg-type]
    assert error.retryable is False
    assert len(api.requests) == 1


def test_an_error_event_retrying_cannot_help_mid_stream_is_not_retried(
    api: MessagesStandin, make: Make
) -> None:
    api.play(mid_stream_error("invalid_request_error", "prompt is too long"))
    error = failure(make())
    assert (error.failure.kind, error.retryable) == ("invalid_request", False)
    assert str(error) == "invalid_request_error mid-stream: prompt is too long"


def test_a_refused_connection_names_the_url(connections: list[Any]) -> None:
    url = f"http://127.0.0.1:{unused_port()}"
    adapter = AnthropicAdapter(AnthropicSettings(model="claude-test"), api_key=KEY, base_url=url)
    error = failure(adapter)
    assert error.failure == ModelFailure("connection", f"connection refused at {url}")
    assert error.retryable is True


def test_a_connection_closed_with_no_answer_is_a_connection_failure(
    api: MessagesStandin, make: Make
) -> None:
    api.play(Hangup())
    error = failure(make())
    assert error.failure.kind == "connection" and error.retryable is True
    assert str(error).startswith(f"the connection to {api.url} failed: ")
    assert "\n" not in str(error)


def unused_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_key_is_sent_and_nothing_leaves_loopback(
    api: MessagesStandin, make: Make, connections: list[Any]
) -> None:
    api.play(Streamed((Text("hi"),)))
    make().respond(ask())
    assert sent_key(api.requests[0].headers) == KEY
    assert connections and all(ipaddress.ip_address(a[0]).is_loopback for a in connections)


def test_without_a_key_the_call_fails_and_nothing_is_sent(api: MessagesStandin) -> None:
    adapter = AnthropicAdapter(
        AnthropicSettings(model="claude-test"), api_key=None, base_url=api.url
    )
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY is not set on this worker") as raised:
        adapter.respond(ask())
    assert raised.value.failure.kind == "not_configured"
    assert raised.value.retryable is False and api.requests == []


def test_the_key_and_base_url_come_from_the_environment_through_bootstrap(
    api: MessagesStandin,
) -> None:
    settings = from_env({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.url})
    assert KEY not in repr(settings)
    adapter = model_for(AnthropicModel(anthropic=AnthropicSettings(model=MODEL)), settings)
    assert adapter.claim_lease_s() == settings.model_lease_s  # one request: no retry waits in it
    api.play(Streamed((Text("hi"),)))
    assert adapter.respond(ask()).model == MODEL
    assert sent_key(api.requests[0].headers) == KEY


def test_breakpoints_mark_the_last_tool_the_system_and_the_conversations_ends(
    api: MessagesStandin, make: Make
) -> None:
    api.play(Streamed((Text("ok"),)))
    result = ToolResultBlock(tool_use_id="toolu_1", content="42")
    history = (
        TASK,
        Message(
            role="assistant", content=(ToolUseBlock(id="toolu_1", name="read_stock", input={}),)
        ),
        Message(role="user", content=(result,)),
    )
    make(system="Audit.", cache_ttl="1h").respond(ask(*history, tools=(READ,)))
    (body,) = api.bodies()
    mark = {"type": "ephemeral", "ttl": "1h"}
    assert body["tools"][-1]["cache_control"] == mark
    assert body["system"] == [
        {"type": "text", "text": "Audit.\n\nBe brief.", "cache_control": mark}
    ]
    assert body["messages"][0]["content"][0]["cache_control"] == mark  # the previous request's end
    assert body["messages"][2]["content"][0]["cache_control"] == mark  # this one's
    assert "cache_control" not in body["messages"][1]["content"][0]  # never on the model's blocks
    assert "cache_control" not in body


def test_automatic_caching_sends_one_top_level_cache_control(
    api: MessagesStandin, make: Make
) -> None:
    api.play(Streamed((Text("ok"),)))
    make(system="Audit.", prompt_cache="automatic").respond(ask(tools=(READ,)))
    (body,) = api.bodies()
    assert body["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in json.dumps([body["messages"], body["tools"], body["system"]])


def test_a_request_goes_to_the_model_it_names(api: MessagesStandin, make: Make) -> None:
    api.play(Streamed((Text("ok"),)))
    request = ModelRequest("run-1", 2, None, (TASK,), (), model="claude-opus-5-5")
    make().respond(request)
    assert api.bodies()[0]["model"] == "claude-opus-5-5"
