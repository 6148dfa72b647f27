"""The Responses API through the real openai SDK against its local stand-in
(loopback), as the adapter speaks it to OpenAI's own: a reasoning model's items go
back verbatim with the next request (the stand-in refuses a stateless request that
drops a reasoning item's encrypted content, or answers a call nobody made), a call
cut by max_output_tokens never runs, a failed response or an error event is a
classified ModelError, the SDK never retries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentledger.schemas.content import (
    Message,
    ProviderBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.schemas.openai_spec import OpenAIModel
from agentledger.services.adapters.models.openai_adapter import OpenAIAdapter
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest
from agentledger.services.settings import Settings
from tests.standin.responses_api import (
    FunctionCall,
    Reasoning,
    ResponsesStandin,
    Say,
    Turn,
    cut,
    failed,
)

KEY = "sk-proj-responses-test-8d1e5f3a7c9b2e4d6f0a"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ResponsesStandin]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with ResponsesStandin() as standin:
        yield standin


def adapter(url: str) -> OpenAIAdapter:
    spec = OpenAIModel.model_validate(
        {"openai": {"model": "gpt-standin-r1", "base_url": url, "api": "responses"}}
    )
    return OpenAIAdapter(
        spec, Settings(model_endpoints=(url,), model_keys=(("OPENAI_API_KEY", KEY),))
    )


def ask(a: OpenAIAdapter, *messages: Message) -> ModelReply:
    return a.respond(ModelRequest("run-1", len(messages), "rules", messages, ()))


GO = Message(role="user", content=(TextBlock(text="go"),))


def test_a_watcher_is_told_the_replys_text_as_it_streams(api: ResponsesStandin) -> None:
    api.play(Turn((Reasoning("Count."), Say("Both read."))))
    pieces: list[str] = []
    request = ModelRequest("run-1", 1, "rules", (GO,), (), watch=pieces.append)
    adapter(api.url).respond(request)
    assert "".join(pieces) == "Both read."


def test_a_reasoning_models_items_go_back_verbatim_and_the_outputs_follow_their_calls(
    api: ResponsesStandin,
) -> None:
    api.play(
        Turn(
            (
                Reasoning("Read both."),
                Say("Reading."),
                FunctionCall("read", {"p": 1}),
                FunctionCall("read", {"p": 2}),
            )
        ),
        Turn((Reasoning("Done."), Say("Both read."))),
    )
    a = adapter(api.url)
    first = ask(a, GO)
    assert first.stop_reason == "tool_use"
    [thought] = [b for b in first.content if isinstance(b, ProviderBlock)]
    assert thought.fields["item"]["encrypted_content"] == "enc-standin-reasoning"
    calls = [b for b in first.content if isinstance(b, ToolUseBlock)]
    assert [c.input for c in calls] == [{"p": 1}, {"p": 2}]
    answers = Message(
        role="user", content=tuple(ToolResultBlock(tool_use_id=c.id, content="ok") for c in calls)
    )
    second = ask(a, GO, Message(role="assistant", content=first.content), answers)
    assert (second.stop_reason, second.content[-1]) == ("end_turn", TextBlock(text="Both read."))
    sent = api.bodies()[1]
    assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]
    assert sent["input"][1] == thought.fields["item"]  # verbatim
    assert [i.get("type") for i in sent["input"]] == [
        None,
        "reasoning",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_call_cut_by_the_output_limit_never_runs(api: ResponsesStandin) -> None:
    api.play(cut((Say("Writing."), FunctionCall("write", {"path": "a", "text": "long"}, cut_at=9))))
    reply = ask(adapter(api.url), GO)
    assert reply.stop_reason == "max_tokens"
    [call] = [b for b in reply.content if isinstance(b, ToolUseBlock)]
    assert reply.truncated_tool_use_ids == (call.id,)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (failed(code="rate_limit_exceeded", message="slow down"), "rate_limited"),
        (failed(code="server_error"), "server_error"),
        (
            Turn(
                (Say("Let me"),),
                stream_error={"type": "server_error", "code": "server_error", "message": "broke"},
            ),
            "server_error",
        ),
        (Turn((Say("Let me"),), drop=True), "stream_broken"),
    ],
)
def test_a_failed_response_is_a_classified_error_asked_once(
    api: ResponsesStandin, reply: Turn, kind: str
) -> None:
    api.play(reply)
    with pytest.raises(ModelError) as raised:
        ask(adapter(api.url), GO)
    assert raised.value.failure.kind == kind
    assert len(api.requests) == 1
