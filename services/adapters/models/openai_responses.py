"""The Responses API's wire shapes (OpenAI's own API), as plain JSON: the request
we send and the reply we rebuild from the stream's events. No SDK here.

Requests are stateless (`store: false`): the whole conversation goes each time,
and the reasoning items a reasoning model returned go back verbatim with their
`encrypted_content` (asked for with `include`), as the API requires for a model
that reasoned before its tool calls. The log keeps its own blocks: a reasoning
item is a `reasoning_item` block holding the item as it came; an output text a
text block; a refusal a `refusal` block; a function call a tool_use block with
its `call_id` as id (its item id kept as `item_id`), its arguments parsed
strictly — a call cut by `max_output_tokens` (its item `incomplete`, or its
arguments not whole) never runs. The response's status, id and
`incomplete_details` are the reply's `stop_details`.

Stop reasons: `completed` is tool_use when the output has calls, a refusal when
it refused, else end_turn; `incomplete` for `max_output_tokens` is max_tokens,
for `content_filter` a refusal; `failed` is a ModelError of the kind its error
code says. Usage: `input_tokens` less the cached ones is input, the cached ones
cache reads, `output_tokens` output."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentledger.events.context_view import tool_definition
from agentledger.events.types import ModelErrorKind, StopReason
from agentledger.schemas.content import (
    ContentBlock,
    Message,
    ProviderBlock,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from agentledger.schemas.openai_spec import OpenAISettings
from agentledger.services.adapters.models.failures import Incomplete, one_line
from agentledger.services.adapters.models.openai_wire import parse_arguments, user_turn
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest

REASONING_ITEM = "reasoning_item"  # the log's block for a reasoning item, kept verbatim
BY_ERROR_CODE: dict[str, ModelErrorKind] = {
    "rate_limit_exceeded": "rate_limited",
    "server_error": "server_error",
    "vector_store_timeout": "timeout",
    "invalid_prompt": "invalid_request",
}
ENDED = ("response.completed", "response.incomplete", "response.failed")


def request_body(settings: OpenAISettings, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of `POST /responses` (streamed) for one request."""
    items: list[dict[str, Any]] = []
    for m in request.messages:
        items += to_items(m)
    body: dict[str, Any] = {
        "model": request.model or settings.model,
        "input": items,
        "max_output_tokens": request.output_limit(settings.max_tokens),
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    system = "\n\n".join(s for s in (settings.system, request.system) if s)
    if system:
        body["instructions"] = system
    tools = [_function(tool_definition(t)) for t in request.tools]
    if tools:
        body["tools"] = tools
        if settings.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.reasoning_effort is not None:
        body["reasoning"] = {"effort": settings.reasoning_effort}
    return body


def _function(definition: dict[str, Any]) -> dict[str, Any]:
    tool = {
        "type": "function",
        "name": definition["name"],
        "parameters": definition.get("input_schema") or {},
        "strict": False,  # our own validation is the one that counts
    }
    if definition.get("description"):
        tool["description"] = definition["description"]
    return tool


def to_items(m: Message) -> list[dict[str, Any]]:
    """One message of the log as input items, in the order they happened: an
    assistant turn's reasoning, text and calls; a user turn's call outputs first
    (each right after the calls it answers), then its text."""
    if m.role == "user":
        answers, text = user_turn(m)
        out: list[dict[str, Any]] = [
            {"type": "function_call_output", "call_id": call_id, "output": said}
            for call_id, said in answers
        ]
        if text is not None:
            out.append({"role": "user", "content": text})
        return out
    return [item for b in m.content if (item := _assistant_item(b)) is not None]


def _assistant_item(b: ContentBlock) -> dict[str, Any] | None:
    match b:
        case TextBlock():
            part = {"type": "output_text", "text": b.text, "annotations": []}
            return {"type": "message", "role": "assistant", "content": [part]}
        case ToolUseBlock():
            item: dict[str, Any] = {
                "type": "function_call",
                "call_id": b.id,
                "name": b.name,
                "arguments": json.dumps(b.input, ensure_ascii=False),
            }
            item_id = (b.model_extra or {}).get("item_id")
            return {**item, "id": item_id} if isinstance(item_id, str) else item
        case ProviderBlock() if b.type == REASONING_ITEM:
            kept = b.fields.get("item")
            return dict(kept) if isinstance(kept, dict) else None
        case ProviderBlock() if b.type == "refusal":
            part = {"type": "refusal", "refusal": str(b.fields.get("refusal") or "")}
            return {"type": "message", "role": "assistant", "content": [part]}
        case _:
            return None


@dataclass
class EventLog:
    """The response as the stream delivered it, event by event (as JSON dicts)."""

    started: bool = False
    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # by output index
    done: set[int] = field(default_factory=set)
    texts: dict[tuple[int, int], str] = field(default_factory=dict)
    refusals: dict[tuple[int, int], str] = field(default_factory=dict)
    arguments: dict[int, str] = field(default_factory=dict)
    final: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    def see(self, event: dict[str, Any]) -> None:
        self.started = True
        kind = str(event.get("type") or "")
        at = int(event.get("output_index") or 0)
        part = (at, int(event.get("content_index") or 0))
        if kind == "response.output_item.added":
            self.items.setdefault(at, dict(event.get("item") or {}))
        elif kind == "response.output_item.done":
            self.items[at] = dict(event.get("item") or {})
            self.done.add(at)
        elif kind == "response.output_text.delta":
            self.texts[part] = self.texts.get(part, "") + str(event.get("delta") or "")
        elif kind == "response.refusal.delta":
            self.refusals[part] = self.refusals.get(part, "") + str(event.get("delta") or "")
        elif kind == "response.function_call_arguments.delta":
            self.arguments[at] = self.arguments.get(at, "") + str(event.get("delta") or "")
        elif kind in ENDED:
            self.final = dict(event.get("response") or {})
        elif kind == "error":
            self.error = event

    def output(self) -> list[dict[str, Any]]:
        """The output items: the final response's, else those the stream built (an item
        never done keeps what its deltas brought, marked incomplete)."""
        listed = (self.final or {}).get("output")
        if isinstance(listed, list) and listed:
            return [dict(i) for i in listed if isinstance(i, dict)]
        built = []
        for at in sorted(self.items):
            item = dict(self.items[at])
            if at not in self.done:
                item["status"] = "incomplete"
                if item.get("type") == "function_call":
                    item["arguments"] = self.arguments.get(at, "")
                elif item.get("type") == "message":
                    item["content"] = self._parts(at)
            built.append(item)
        return built

    def _parts(self, at: int) -> list[dict[str, Any]]:
        parts = [
            {"type": "output_text", "text": t}
            for (i, _), t in sorted(self.texts.items())
            if i == at
        ]
        parts += [
            {"type": "refusal", "refusal": r}
            for (i, _), r in sorted(self.refusals.items())
            if i == at
        ]
        return parts


def to_reply(log: EventLog, request: ModelRequest) -> ModelReply:
    """The reply the log keeps, from a stream that ended with the response's status."""
    if log.error is not None:
        raise _failure(log.error, "mid-stream")
    final = log.final
    if final is None:
        raise Incomplete("the stream ended before the response was complete")
    status = str(final.get("status") or "")
    if status == "failed":
        raise _failure(final.get("error") or {}, "failed")
    content: list[ContentBlock] = []
    cut: list[tuple[str, str]] = []
    for item in log.output():
        content += _blocks(item, cut)
    reason = str((final.get("incomplete_details") or {}).get("reason") or "")
    stop = _stop_reason(status, reason, content)
    details = {"status": status, "id": final.get("id")}
    if final.get("incomplete_details"):
        details["incomplete_details"] = final["incomplete_details"]
    return ModelReply(
        content=tuple(content),
        stop_reason=stop,
        usage=_usage(final.get("usage") or {}),
        model=str(final.get("model") or request.model or ""),
        truncated_tool_use_ids=tuple(i for i, _ in cut),
        truncated_tool_json=tuple(cut),
        stop_details={k: v for k, v in details.items() if v is not None},
    )


def _blocks(item: dict[str, Any], cut: list[tuple[str, str]]) -> list[ContentBlock]:
    kind = item.get("type")
    if kind == "reasoning":
        return [ProviderBlock(type=REASONING_ITEM, item=item)]
    if kind == "message":
        blocks: list[ContentBlock] = []
        for part in item.get("content") or ():
            if part.get("type") == "output_text":
                blocks.append(TextBlock(text=str(part.get("text") or "")))
            elif part.get("type") == "refusal":
                blocks.append(ProviderBlock(type="refusal", refusal=str(part.get("refusal") or "")))
        return blocks
    if kind == "function_call":
        call_id, raw = (
            str(item.get("call_id") or item.get("id") or ""),
            str(item.get("arguments") or ""),
        )
        if not call_id or not item.get("name"):
            raise ModelError(
                "the model sent a function call without its call_id or name", kind="malformed_reply"
            )
        arguments = None if item.get("status") == "incomplete" else parse_arguments(raw)
        if arguments is None:
            cut.append((call_id, raw))
        extra = {"item_id": item["id"]} if isinstance(item.get("id"), str) else {}
        return [ToolUseBlock(id=call_id, name=str(item["name"]), input=arguments or {}, **extra)]
    return [ProviderBlock(type=f"openai_{kind}", item=item)]  # a kind we do not act on, kept


def _stop_reason(status: str, reason: str, content: list[ContentBlock]) -> StopReason:
    if status == "incomplete":
        if reason == "content_filter":
            return "refusal"
        if reason == "max_output_tokens":
            return "max_tokens"
        raise ModelError(f"the response is incomplete for {reason!r}", kind="malformed_reply")
    if status != "completed":
        raise ModelError(f"unknown response status {status!r}", kind="malformed_reply")
    if any(isinstance(b, ProviderBlock) and b.type == "refusal" for b in content):
        return "refusal"
    return "tool_use" if any(isinstance(b, ToolUseBlock) for b in content) else "end_turn"


def _failure(error: dict[str, Any], where: str) -> ModelError:
    code = str(error.get("code") or error.get("type") or "error")
    said = one_line(str(error.get("message") or "no message"))
    return ModelError(f"{code} {where}: {said}", kind=BY_ERROR_CODE.get(code, "server_error"))


def _usage(u: dict[str, Any]) -> Usage:
    cached = int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(
        input_tokens=max(0, int(u.get("input_tokens") or 0) - cached),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_input_tokens=cached,
    )
