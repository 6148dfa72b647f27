"""The OpenAI-compatible adapter through the real openai SDK against the local
stand-in of the Chat Completions API (loopback): both server flavours' replies
are rebuilt the same way, every failure is a classified ModelError with its
cause in one line, the SDK never retries on its own (each attempt is the log's),
and the key sent is the one the deployment allows the spec to name — or none."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator

import pytest

from agentledger.schemas.content import Message, TextBlock, ToolUseBlock
from agentledger.schemas.openai_spec import OpenAIModel
from agentledger.services.adapters.models.openai_adapter import NO_KEY, OpenAIAdapter
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.settings import Settings
from tests.standin.chat_completions import Call, Chat, ChatStandin, Failed, Hangup

KEY = "sk-proj-adapter-test-3f9a1c7e5b2d4a6c8e0f"
REQUEST = ModelRequest(
    "run-1", 1, None, (Message(role="user", content=(TextBlock(text="go"),)),), ()
)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatStandin]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with ChatStandin() as standin:
        yield standin


def adapter(
    url: str,
    *,
    key: str | None = KEY,
    var: str | None = None,
    allowed: tuple[str, ...] | None = None,
) -> OpenAIAdapter:
    spec = OpenAIModel.model_validate(
        {"openai": {"model": "gpt-standin-1", "base_url": url, "api_key_env": var}}
    )
    keys = ((var or "OPENAI_API_KEY", key),) if key else ()
    settings = Settings(
        model_endpoints=(url,) if allowed is None else allowed,
        model_keys=keys,
        model_key_vars=var or "OPENAI_API_KEY",
    )
    return OpenAIAdapter(spec, settings)


def failure(a: OpenAIAdapter) -> ModelError:
    with pytest.raises(ModelError) as raised:
        a.respond(REQUEST)
    return raised.value


def test_a_watcher_is_told_the_replys_text_as_it_streams(api: ChatStandin) -> None:
    api.play(Chat(content="Two widgets."))
    pieces: list[str] = []
    reply = adapter(api.url).respond(dataclasses.replace(REQUEST, watch=pieces.append))
    assert "".join(pieces) == "Two widgets." and reply.content == (TextBlock(text="Two widgets."),)


@pytest.mark.parametrize("flavour", ["vllm", "ollama"])
def test_both_flavours_give_the_same_calls(api: ChatStandin, flavour: str) -> None:
    api.play(
        Chat(
            content="Two.",
            calls=(Call("read", {"p": 1}, id="a"), Call("read", {"p": 2}, id="b")),
            flavour=flavour,
        )
    )  # type: ignore[arg-type]
    reply = adapter(api.url).respond(REQUEST)
    assert reply.stop_reason == "tool_use"
    assert [b for b in reply.content if isinstance(b, ToolUseBlock)] == [
        ToolUseBlock(id="a", name="read", input={"p": 1}),
        ToolUseBlock(id="b", name="read", input={"p": 2}),
    ]
    assert (reply.stop_details or {}).get("usage_estimated", False) is (flavour == "ollama")


def test_the_allowed_key_is_sent_as_the_bearer_and_a_keyless_server_gets_a_placeholder(
    api: ChatStandin,
) -> None:
    api.play(Chat(content="a"), Chat(content="b"))
    adapter(api.url).respond(REQUEST)
    adapter(api.url, key=None).respond(REQUEST)
    assert [r.headers["authorization"] for r in api.requests] == [
        f"Bearer {KEY}",
        f"Bearer {NO_KEY}",
    ]


@pytest.mark.parametrize(
    ("reply", "kind", "said"),
    [
        (
            Failed(401, "Incorrect API key", type="invalid_request_error", code="invalid_api_key"),
            "authentication",
            "authentication failed (401",
        ),
        (
            Failed(429, "Rate limit reached", type="rate_limit_error", retry_after=7),
            "rate_limited",
            "rate limited (429",
        ),
        (
            Failed(400, "maximum context length is 8192 tokens", type="BadRequestError"),
            "invalid_request",
            "maximum context length",
        ),
        (
            Failed(503, "no healthy upstream", type="server_error"),
            "server_error",
            "server error (503",
        ),
        (
            Chat(
                content="Let me",
                error={"message": "engine died", "type": "server_error", "code": 500},
            ),
            "server_error",
            "mid-stream: engine died",
        ),
        (Chat(content="Let me", finish_reason=None), "stream_broken", "ended"),
        (Hangup(), "connection", "127.0.0.1"),
    ],
)
def test_every_failure_is_classified_with_its_cause_and_never_retried_by_the_sdk(
    api: ChatStandin, reply: object, kind: str, said: str
) -> None:
    api.play(reply)  # type: ignore[arg-type]
    error = failure(adapter(api.url))
    assert error.failure.kind == kind
    assert said in str(error) and "\n" not in str(error)
    assert len(api.requests) == 1  # the log decides on another attempt, not the SDK
    if kind == "rate_limited":
        assert error.failure.retry_after_s == 7


def test_nothing_listening_is_a_connection_error_naming_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    error = failure(adapter(url))
    assert (error.failure.kind, str(error)) == ("connection", f"connection refused at {url}")


def test_an_endpoint_or_key_variable_the_deployment_does_not_allow_is_never_asked(
    api: ChatStandin,
) -> None:
    # a hostile spec: its own server, or another worker secret sent along as the key
    other = adapter(api.url, allowed=("http://127.0.0.1:1/v1",))
    assert failure(other).failure.kind == "not_configured"
    spec = OpenAIModel.model_validate(
        {"openai": {"model": "m", "base_url": api.url, "api_key_env": "AWS_SECRET_ACCESS_KEY"}}
    )
    settings = Settings(model_endpoints=(api.url,), model_keys=(("OPENAI_API_KEY", KEY),))
    error = failure(OpenAIAdapter(spec, settings))
    assert error.failure.kind == "not_configured" and "AGENTLEDGER_MODEL_KEY_VARS" in str(error)
    assert api.requests == []


def test_openai_itself_is_never_asked_without_a_key() -> None:
    spec = OpenAIModel.model_validate({"openai": {"model": "gpt-5-mini"}})
    error = failure(OpenAIAdapter(spec, Settings()))
    assert (error.failure.kind, str(error)) == (
        "not_configured",
        "OPENAI_API_KEY is not set on this worker",
    )
