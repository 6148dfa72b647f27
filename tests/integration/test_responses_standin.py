"""The Responses API stand-in (tests/standin/responses_api.py) driven through
the real `openai` SDK: a streamed turn as typed events, as raw dicts
(`client.post(..., stream_cls=openai.Stream[object])`) and through the
`responses.stream` helper, a cut function call, a failed response, a
mid-stream error event, the two 400s it answers for a bad input, HTTP errors,
and the requests the SDK sent, as recorded."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, cast

import openai
import pytest
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseRefusalDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
)

from tests.standin.responses_api import (
    MODEL,
    NOTHING_LEFT,
    Failed,
    FunctionCall,
    Hangup,
    Reasoning,
    Refuse,
    ResponsesStandin,
    Say,
    Turn,
    cut,
    failed,
)

KEY = "sk-standin-0123456789"
ASK: list[Any] = [{"role": "user", "content": "When is high water on Thursday?"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": name,
        "description": f"the {name} of a port",
        "parameters": {"type": "object", "properties": {"port": {"type": "string"}}},
        "strict": False,
    }
    for name in ("tides", "weather")
]
ENCRYPTED = ["reasoning.encrypted_content"]
TURN = Turn(
    (
        Reasoning("Two lookups, side by side.", encrypted_content="enc-1"),
        Say("Looking up the tides and the weather."),
        FunctionCall("tides", {"port": "Brest"}),
        FunctionCall("weather", {"port": "Brest"}, call_id="call_w1"),
    ),
    cached_tokens=5,
)


@pytest.fixture
def api() -> Iterator[ResponsesStandin]:
    with ResponsesStandin() as standin:
        yield standin


@pytest.fixture
def client(api: ResponsesStandin) -> Iterator[openai.OpenAI]:
    # trust_env=False: a proxy in the environment must not catch the loopback calls
    http_client = openai.DefaultHttpxClient(trust_env=False, timeout=5)
    with openai.OpenAI(api_key=KEY, base_url=api.url, max_retries=0, http_client=http_client) as c:
        yield c


def stream(client: openai.OpenAI, **kwargs: Any) -> list[ResponseStreamEvent]:
    kwargs = {"input": ASK, "tools": TOOLS} | kwargs
    return list(client.responses.create(model=MODEL, stream=True, **kwargs))


def raw_stream(client: openai.OpenAI, **body: Any) -> list[dict[str, Any]]:
    body = {"model": MODEL, "input": ASK, "tools": TOOLS, "stream": True} | body
    events = client.post(
        "/responses", cast_to=object, body=body, stream=True, stream_cls=openai.Stream[object]
    )
    raw = list(events)
    assert all(isinstance(e, dict) for e in raw)  # each event's JSON, as it came
    return cast(list[dict[str, Any]], raw)


def final(events: list[ResponseStreamEvent]) -> Response:
    """The response of the last event (response.completed, .incomplete or .failed)."""
    last = events[-1]
    assert isinstance(last, ResponseCompletedEvent | ResponseIncompleteEvent | ResponseFailedEvent)
    return last.response


def message_of(error: openai.APIStatusError) -> str:
    """The API's own message (the exception's `message` is "Error code: 400 - …")."""
    assert isinstance(error.body, dict)
    return str(error.body["message"])


def test_a_streamed_turn_of_reasoning_text_and_two_calls_parses(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(TURN)
    events = stream(client, include=ENCRYPTED, store=False)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    created = events[0]
    assert isinstance(created, ResponseCreatedEvent) and events[1].type == "response.in_progress"
    assert created.response.status == "in_progress" and created.response.output == []
    assert isinstance(events[-1], ResponseCompletedEvent)
    response = final(events)
    assert response.id == created.response.id and re.fullmatch(r"resp_[0-9a-f]+", response.id)
    assert (response.status, response.model, response.incomplete_details) == (
        "completed",
        MODEL,
        None,
    )
    assert [t.to_dict().get("name") for t in response.tools] == ["tides", "weather"]
    reasoning, message, tides, weather = response.output
    assert isinstance(reasoning, ResponseReasoningItem) and reasoning.id.startswith("rs_")
    assert [s.text for s in reasoning.summary] == ["Two lookups, side by side."]
    assert reasoning.encrypted_content == "enc-1"
    assert isinstance(message, ResponseOutputMessage) and message.id.startswith("msg_")
    assert response.output_text == "Looking up the tides and the weather."
    assert isinstance(tides, ResponseFunctionToolCall)
    assert isinstance(weather, ResponseFunctionToolCall)
    assert tides.id is not None and tides.id.startswith("fc_")
    assert re.fullmatch(r"call_[a-z0-9]{24}", tides.call_id)
    assert (tides.name, json.loads(tides.arguments), tides.status) == (
        "tides",
        {"port": "Brest"},
        "completed",
    )
    assert (weather.call_id, weather.arguments) == ("call_w1", '{"port": "Brest"}')
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 7)
    assert response.usage.input_tokens_details.cached_tokens == 5
    # the text and the arguments come in 7-character fragments, as the items say at the end
    deltas = [e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)]
    assert isinstance(message.content[0], ResponseOutputText)
    assert deltas[0] == "Looking" and "".join(deltas) == message.content[0].text
    args = [e.delta for e in events if isinstance(e, ResponseFunctionCallArgumentsDeltaEvent)]
    assert "".join(args) == tides.arguments + weather.arguments
    assert api.bodies()[0]["stream"] is True and api.bodies()[0]["input"] == ASK


def test_the_encrypted_reasoning_comes_only_when_included(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(Turn((Reasoning(),)))
    (reasoning,) = final(stream(client)).output
    assert isinstance(reasoning, ResponseReasoningItem)
    assert (reasoning.summary, reasoning.encrypted_content) == ([], None)


def test_the_raw_path_yields_the_same_events_as_dicts(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(TURN, TURN)
    typed = stream(client, include=ENCRYPTED)
    raw = raw_stream(client, include=ENCRYPTED)
    assert [e["type"] for e in raw] == [e.type for e in typed]
    final = raw[-1]["response"]
    assert final["status"] == "completed" and final["object"] == "response"
    rs, msg, fc, _ = (item["id"] for item in final["output"])
    assert final["output"] == [
        {
            "type": "reasoning",
            "id": rs,
            "summary": [{"type": "summary_text", "text": "Two lookups, side by side."}],
            "encrypted_content": "enc-1",
        },
        {
            "type": "message",
            "id": msg,
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "Looking up the tides and the weather.",
                    "annotations": [],
                }
            ],
        },
        {
            "type": "function_call",
            "id": fc,
            "call_id": final["output"][2]["call_id"],
            "name": "tides",
            "arguments": '{"port": "Brest"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": final["output"][3]["id"],
            "call_id": "call_w1",
            "name": "weather",
            "arguments": '{"port": "Brest"}',
            "status": "completed",
        },
    ]
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 5
    # the same items as output_item.done sent them
    done = [e["item"] for e in raw if e["type"] == "response.output_item.done"]
    assert done == final["output"]


def test_the_stream_helper_puts_the_response_together(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(Turn((Say("High water at 14:02."), FunctionCall("tides", {"port": "Brest"}))))
    with client.responses.stream(model=MODEL, input=ASK, tools=TOOLS) as events:
        response = events.get_final_response()
    assert response.output_text == "High water at 14:02."
    assert isinstance(response.output[1], ResponseFunctionToolCall)
    assert response.output[1].arguments == '{"port": "Brest"}'


def test_a_refusal_streams_as_refusal_deltas(client: openai.OpenAI, api: ResponsesStandin) -> None:
    api.play(Turn((Refuse("I can't help with that."),)))
    events = stream(client)
    deltas = [e.delta for e in events if isinstance(e, ResponseRefusalDeltaEvent)]
    assert "".join(deltas) == "I can't help with that."
    (message,) = final(events).output
    assert isinstance(message, ResponseOutputMessage)
    assert isinstance(message.content[0], ResponseOutputRefusal)
    assert message.content[0].refusal == "I can't help with that."


def test_a_cut_call_sends_part_of_its_arguments_and_no_done_events(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(cut((Say("Looking."), FunctionCall("tides", {"port": "Brest"}, cut_at=9))))
    events = stream(client)
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.done" not in kinds
    assert kinds.count("response.output_item.added") == 2
    assert kinds.count("response.output_item.done") == 1  # the message's only
    args = [e.delta for e in events if isinstance(e, ResponseFunctionCallArgumentsDeltaEvent)]
    assert "".join(args) == '{"port": '
    last = events[-1]
    assert isinstance(last, ResponseIncompleteEvent)
    assert last.response.status == "incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    call = last.response.output[1]
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.arguments, call.status) == ('{"port": ', "incomplete")


def test_a_failed_response_is_an_event_on_both_paths_not_an_exception(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(failed((Say("Let me"),), message="The model crashed."), failed())
    last = stream(client)[-1]
    assert isinstance(last, ResponseFailedEvent)
    assert last.response.status == "failed"
    assert last.response.error is not None
    assert (last.response.error.code, last.response.error.message) == (
        "server_error",
        "The model crashed.",
    )
    assert last.response.output_text == "Let me"
    raw = raw_stream(client)
    assert raw[-1]["type"] == "response.failed"
    assert raw[-1]["response"]["error"]["code"] == "server_error"


def test_a_mid_stream_error_event_in_the_live_shape_raises_api_error(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    error = {"type": "server_error", "code": "server_error", "message": "Overloaded"}
    api.play(Turn((Say("Let me"),), stream_error=error), Turn((), stream_error=error))
    with pytest.raises(openai.APIError, match="Overloaded") as raised:
        stream(client)
    assert not isinstance(raised.value, openai.APIStatusError)
    with pytest.raises(openai.APIError, match="Overloaded"):
        raw_stream(client)


def test_a_dropped_stream_just_ends(client: openai.OpenAI, api: ResponsesStandin) -> None:
    api.play(Turn((Say("Let me"),), drop=True))
    assert raw_stream(client)[-1]["type"] == "response.output_item.done"


def test_a_request_that_does_not_stream_gets_the_response_object(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(Turn((Say("High water at 14:02."),)))
    response = client.responses.create(model=MODEL, input=ASK)
    assert (response.status, response.output_text) == ("completed", "High water at 14:02.")
    assert "stream" not in api.bodies()[0]


def test_a_stateless_request_with_a_reasoning_item_without_its_content_is_refused(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(Turn((Say("ok"),)))
    bare = {"type": "reasoning", "id": "rs_1", "summary": []}
    with pytest.raises(openai.BadRequestError) as raised:
        stream(client, input=[*ASK, bare], store=False)
    assert raised.value.status_code == 400
    assert message_of(raised.value) == (
        "Item 'rs_1' of type 'reasoning' was provided without its required 'encrypted_content'"
    )
    # stored: the item is found by id; and the refused request left the reply queued
    assert stream(client, input=[*ASK, bare])[-1].type == "response.completed"
    api.play(Turn((Say("ok"),)))
    whole = bare | {"encrypted_content": "enc-1"}
    assert stream(client, input=[*ASK, whole], store=False)[-1].type == "response.completed"


def test_a_tool_output_before_its_call_is_refused(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "tides", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "14:02"}
    api.play(Turn((Say("High water at 14:02."),)))
    with pytest.raises(openai.BadRequestError) as raised:
        stream(client, input=[*ASK, output, call])
    assert (
        message_of(raised.value)
        == "No tool call found for function call output with call_id call_1."
    )
    assert stream(client, input=[*ASK, call, output])[-1].type == "response.completed"


def test_a_tool_output_may_answer_a_call_of_the_previous_response(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(Turn((FunctionCall("tides", {}, call_id="call_9"),)), Turn((Say("14:02."),)))
    first = final(stream(client))
    output = {"type": "function_call_output", "call_id": "call_9", "output": "14:02"}
    events = stream(client, input=[output], previous_response_id=first.id)
    assert events[-1].type == "response.completed"
    with pytest.raises(openai.BadRequestError, match="call_id call_9"):
        stream(client, input=[output])


def test_a_429_with_retry_after_raises_a_rate_limit_error(
    client: openai.OpenAI, api: ResponsesStandin
) -> None:
    api.play(Failed(429, "Rate limit reached", "requests", "rate_limit_exceeded", retry_after=2))
    with pytest.raises(openai.RateLimitError) as raised:
        stream(client)
    assert raised.value.response.headers["retry-after"] == "2"
    assert raised.value.code == "rate_limit_exceeded"
    assert raised.value.body == {
        "message": "Rate limit reached",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_a_hangup_and_an_empty_queue(client: openai.OpenAI, api: ResponsesStandin) -> None:
    api.play(Hangup())
    with pytest.raises(openai.APIConnectionError):
        stream(client)
    with pytest.raises(openai.BadRequestError, match=NOTHING_LEFT):
        stream(client)
    assert [r.path for r in api.requests] == ["/v1/responses", "/v1/responses"]
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"
