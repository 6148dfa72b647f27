"""The Messages API's wire shapes, as plain JSON: the request we send and the
reply we rebuild from the stream's events. No SDK here (the adapter hands the
events in as dicts), so every block is kept as the API sent it.

The reply is accumulated from the raw events rather than from the SDK's
snapshot, which drops what it does not know (a `compaction` block's content,
fields added later): each `content_block_start` block is kept whole and its
deltas applied (text, citations, thinking, signature, compaction, and any
later delta merged field by field). Tool input JSON is collected from the
`input_json_delta` fragments and parsed strictly: a tool call cut off by
max_tokens must not look like a smaller, valid call.

The request carries the context view verbatim, plus what the API needs around
it: the prompt-cache breakpoints (`events/prompt_cache.py`) or the top-level
automatic one, and a final assistant text without trailing whitespace (the API
refuses it, and a paused turn continued as it came can end so)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import TypeAdapter, ValidationError

from agentledger.events.context_view import tool_definition
from agentledger.events.prompt_cache import conversation_breakpoints
from agentledger.events.types import StopReason
from agentledger.schemas.content import ContentBlock, Usage, to_api
from agentledger.schemas.spec import AnthropicSettings
from agentledger.services.adapters.models.failures import Incomplete
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest

DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's own, when ANTHROPIC_BASE_URL is unset
STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
_BLOCK: TypeAdapter[ContentBlock] = TypeAdapter(ContentBlock)


def request_params(settings: AnthropicSettings, request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `messages.create(stream=True)` for one request."""
    mark = _mark(settings)
    messages: list[dict[str, Any]] = [
        {"role": m.role, "content": [to_api(b) for b in m.content]} for m in request.messages
    ]
    _trim_final_assistant_text(messages)
    params: dict[str, Any] = {
        "model": request.model or settings.model,
        "max_tokens": request.output_limit(settings.max_tokens),
        "messages": messages,
    }
    system = "\n\n".join(s for s in (settings.system, request.system) if s)
    system_blocks: list[dict[str, Any]] = [{"type": "text", "text": system}] if system else []
    if system:  # as a block where a breakpoint goes on it
        breakpoints = settings.prompt_cache == "breakpoints"
        params["system"] = system_blocks if breakpoints else system
    tools = [tool_definition(t) for t in request.tools] + [dict(t) for t in request.server_tools]
    if tools:
        params["tools"] = tools
    if settings.thinking is not None:
        params["thinking"] = dict(settings.thinking)
    if settings.prompt_cache == "automatic":
        params["cache_control"] = mark
    elif settings.prompt_cache == "breakpoints":
        for target in [*tools[-1:], *system_blocks[-1:]]:
            target["cache_control"] = mark
        for i, j in conversation_breakpoints(request.messages):
            messages[i]["content"][j]["cache_control"] = mark
    return params


def _mark(settings: AnthropicSettings) -> dict[str, str]:
    mark = {"type": "ephemeral"}
    if settings.cache_ttl == "1h":
        mark["ttl"] = "1h"
    return mark


def _trim_final_assistant_text(messages: list[dict[str, Any]]) -> None:
    if not messages or messages[-1]["role"] != "assistant" or not messages[-1]["content"]:
        return
    last = messages[-1]["content"][-1]
    if last.get("type") == "text" and last["text"] != last["text"].rstrip():
        last["text"] = last["text"].rstrip()


@dataclass
class StreamLog:
    """The message as the stream delivered it, event by event (as JSON dicts)."""

    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    raw: dict[int, str] = field(default_factory=dict)  # tool input JSON, by block index
    stopped: set[int] = field(default_factory=set)
    delta: dict[str, Any] = field(default_factory=dict)  # stop_reason, stop_sequence, ...
    usage: dict[str, Any] = field(default_factory=dict)

    def see(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(event["message"])
            self.usage.update(_given(self.message.get("usage") or {}))
        elif kind == "content_block_start":
            self.blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            self._apply(event["index"], dict(event["delta"]))
        elif kind == "content_block_stop":
            self.stopped.add(event["index"])
        elif kind == "message_delta":
            self.delta.update(event.get("delta") or {})
            self.usage.update(_given(event.get("usage") or {}))  # totals: they overwrite

    def _apply(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {})
        kind = delta.pop("type", None)
        match kind:
            case "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            case "input_json_delta":
                self.raw[index] = self.raw.get(index, "") + delta.get("partial_json", "")
            case "citations_delta":
                block["citations"] = [*(block.get("citations") or []), delta.get("citation")]
            case "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            case "signature_delta":
                block["signature"] = delta.get("signature", "")
            case "compaction_delta":
                block.update(delta)
            case _:  # a delta the API added later: strings grow, anything else is replaced
                for key, value in delta.items():
                    old = block.get(key)
                    both = isinstance(old, str) and isinstance(value, str)
                    block[key] = old + value if both else value

    def tool_input(self, index: int, *, cut_off: bool) -> dict[str, Any] | None:
        """The block's input, or None when its JSON did not arrive whole.
        `cut_off`: max_tokens stopped the message inside this block."""
        started = self.blocks[index].get("input")
        raw = self.raw.get(index, "")
        if index not in self.stopped:
            return None
        if raw == "":
            return None if cut_off else dict(started or {})
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def _given(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def to_reply(log: StreamLog) -> ModelReply:
    stop = log.delta.get("stop_reason")
    if log.message is None or stop is None:
        raise Incomplete("the stream ended before the message was complete")
    if stop not in STOP_REASONS:
        raise ModelError(f"unknown stop reason {stop!r}", kind="malformed_reply")
    content: list[ContentBlock] = []
    cut: list[tuple[str, str]] = []
    last = max(log.blocks, default=-1)
    for index in sorted(log.blocks):
        block = dict(log.blocks[index])
        if "input" in block:  # tool_use, server_tool_use and their kin
            tool_input = log.tool_input(index, cut_off=stop == "max_tokens" and index == last)
            if tool_input is None and block.get("type") == "tool_use":
                cut.append((str(block.get("id")), log.raw.get(index, "")))
            block["input"] = tool_input if tool_input is not None else {}
        content.append(_block(block))
    return ModelReply(
        content=tuple(content),
        stop_reason=stop,
        usage=usage_of(log.usage),
        model=str(log.message.get("model", "")),
        truncated_tool_use_ids=tuple(i for i, _ in cut),
        truncated_tool_json=tuple(cut),
        stop_sequence=log.delta.get("stop_sequence"),
        stop_details=log.delta.get("stop_details"),
    )


def _block(block: dict[str, Any]) -> ContentBlock:
    try:
        return _BLOCK.validate_python(block)
    except ValidationError as exc:
        kind, first = block.get("type"), exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        said = f"{where}: {first['msg']}" if where else first["msg"]
        raise ModelError(
            f"the model sent a malformed {kind!r} block ({said})", kind="malformed_reply"
        ) from exc


def usage_of(u: dict[str, Any]) -> Usage:
    split = u.get("cache_creation") or {}
    tools = u.get("server_tool_use") or {}
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_input_tokens=int(u.get("cache_read_input_tokens") or 0),
        cache_creation_input_tokens=int(u.get("cache_creation_input_tokens") or 0),
        cache_creation_1h_input_tokens=int(split.get("ephemeral_1h_input_tokens") or 0),
        server_tool_use={k: v for k, v in tools.items() if isinstance(v, int) and v},
    )
