"""The anthropic adapter: Claude through the official SDK's streaming Messages
API. It is the only module that imports `anthropic`.

Requests always stream (the SDK refuses non-streaming calls with a large
max_tokens). Our content blocks go out as the API's own dicts, so thinking
blocks and their signatures are sent back exactly as they came. Tool input
JSON is collected from the raw `input_json_delta` fragments and parsed
strictly, because the SDK's snapshot parses it in partial mode: a tool call
cut off by max_tokens would otherwise look like a smaller, valid call. The
retry policy is ours (the SDK's `max_retries` is 0) so that every retry is
reported with the reply."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, get_args

import anthropic
import httpx2
from anthropic.lib.streaming import ParsedMessageStreamEvent
from anthropic.types import Message as ApiMessage

from events.types import StopReason
from schemas.content import (
    ContentBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from schemas.spec import AnthropicSettings
from services.adapters.models.port import ModelError, ModelReply, ModelRequest

DEFAULT_BASE_URL = "https://api.anthropic.com"
STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
# SDK 2.x sends anthropic-version 2026-10-21, which refuses sampling parameters
# (even at their defaults), and has no `temperature` argument any more
NO_TEMPERATURE = (
    "the Messages API version the anthropic SDK sends refuses `temperature`; "
    "remove it from the run spec's anthropic settings"
)
RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx (529 "overloaded" included)
# error types that an `error` event in a 200 stream may carry and a retry cannot fix
CLIENT_ERROR_TYPES = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error"}
    | {"request_too_large", "billing_error"}
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_s: float = 1.0  # the first backoff; it doubles per retry, with jitter
    max_wait_s: float = 30.0  # no single wait is longer, whatever retry-after says

    def wait_s(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_wait_s, retry_after)
        backoff = self.base_s * 2.0 ** (retry - 1)
        return min(self.max_wait_s, backoff * random.uniform(0.5, 1.0))


class _Transient(Exception):
    """A failed attempt that a later attempt may get past."""

    def __init__(self, what: str, retry_after: float | None = None):
        self.what = what
        self.retry_after = retry_after
        super().__init__(what)


@dataclass
class _StreamLog:
    """What the stream delivered that the SDK's snapshot does not keep: whether
    the message started, and the raw input JSON of each tool_use block."""

    started: bool = False
    raw: dict[int, str] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)

    def see(self, event: ParsedMessageStreamEvent[Any]) -> None:
        if event.type == "message_start":
            self.started = True
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            self.raw[event.index] = self.raw.get(event.index, "") + event.delta.partial_json
        elif event.type == "content_block_stop":
            self.stopped.add(event.index)

    def tool_input(
        self, index: int, started_with: dict[str, Any], *, cut_off: bool
    ) -> dict[str, Any] | None:
        """The block's input, or None when its JSON did not arrive whole.
        `cut_off`: max_tokens stopped the message inside this block."""
        raw = self.raw.get(index, "")
        if index not in self.stopped:
            return None
        if raw == "":
            return None if cut_off else dict(started_with)
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


class AnthropicAdapter:
    def __init__(
        self,
        settings: AnthropicSettings,
        *,
        api_key: str | None,
        base_url: str | None = None,
        lease_s: float = 120.0,
        retry: RetryPolicy | None = None,
        timeout_s: float = 600.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._settings = settings
        self._lease_s = lease_s
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        # with no key the SDK would look for credentials on its own (env, profiles on disk)
        self._client = None
        if api_key:
            self._client = anthropic.Anthropic(
                api_key=api_key,
                base_url=base_url or DEFAULT_BASE_URL,
                max_retries=0,
                timeout=timeout_s,
            )

    def claim_lease_s(self) -> float:
        # the claim must outlive our own retries, or another worker re-drives the turn meanwhile
        return self._lease_s + self._retry.max_retries * self._retry.max_wait_s

    def respond(self, request: ModelRequest) -> ModelReply:
        if self._client is None:
            raise ModelError("ANTHROPIC_API_KEY is not set", retryable=False)
        if self._settings.temperature is not None:
            raise ModelError(NO_TEMPERATURE, retryable=False)
        params = request_params(self._settings, request)
        retries: list[str] = []
        while True:
            try:
                return replace(self._attempt(self._client, params), retries=tuple(retries))
            except _Transient as failure:
                if len(retries) >= self._retry.max_retries:
                    message = f"{failure.what}; gave up after {len(retries)} retries"
                    raise ModelError(message, retryable=True, retries=tuple(retries)) from failure
                wait = self._retry.wait_s(len(retries) + 1, failure.retry_after)
                retries.append(f"retry {len(retries) + 1}: {failure.what}; waited {wait:.3f}s")
                self._sleep(wait)

    def _attempt(self, client: anthropic.Anthropic, params: dict[str, Any]) -> ModelReply:
        log = _StreamLog()
        try:
            with client.messages.stream(**params) as stream:
                for event in stream:
                    log.see(event)
                if not log.started:
                    raise _Transient("the stream ended before message_start")
                final = stream.get_final_message()
        except anthropic.APIStatusError as exc:
            raise _status_failure(exc) from exc
        except anthropic.APIConnectionError as exc:
            raise _Transient(f"connection failed: {exc.message}") from exc
        except httpx2.TransportError as exc:  # the SDK does not wrap errors while reading a stream
            raise _Transient(f"stream broken: {exc!r}") from exc
        return to_reply(final, log)


def request_params(settings: AnthropicSettings, request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `messages.stream` for one request."""
    params: dict[str, Any] = {
        "model": settings.model,
        "max_tokens": settings.max_tokens,
        "messages": [
            {"role": m.role, "content": [b.model_dump(mode="json") for b in m.content]}
            for m in request.messages
        ],
    }
    system = "\n\n".join(s for s in (settings.system, request.system) if s)
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    if settings.thinking is not None:
        params["thinking"] = dict(settings.thinking)
    return params


def to_reply(final: ApiMessage, log: _StreamLog) -> ModelReply:
    stop = final.stop_reason
    if stop is None:
        raise _Transient("the stream ended before the message was complete")
    if stop not in STOP_REASONS:
        raise ModelError(f"unknown stop reason {stop!r}", retryable=False)
    content: list[ContentBlock] = []
    cut: list[tuple[str, str]] = []
    last = len(final.content) - 1
    for index, block in enumerate(final.content):
        if block.type == "tool_use":
            cut_off = stop == "max_tokens" and index == last
            tool_input = log.tool_input(index, block.input, cut_off=cut_off)
            if tool_input is None:
                cut.append((block.id, log.raw.get(index, "")))
            content.append(ToolUseBlock(id=block.id, name=block.name, input=tool_input or {}))
        else:
            content.append(_block(block))
    return ModelReply(
        content=tuple(content),
        stop_reason=stop,
        usage=_usage(final.usage),
        model=final.model,
        truncated_tool_use_ids=tuple(i for i, _ in cut),
        truncated_tool_json=tuple(cut),
    )


def _block(block: Any) -> ContentBlock:
    match block.type:
        case "text":
            return TextBlock(text=block.text)
        case "thinking":
            return ThinkingBlock(thinking=block.thinking, signature=block.signature)
        case "redacted_thinking":
            return RedactedThinkingBlock(data=block.data)
        case other:
            raise ModelError(
                f"the model sent a {other!r} block, which we cannot keep", retryable=False
            )


def _usage(usage: anthropic.types.Usage) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens or 0,
        cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
    )


def _status_failure(exc: anthropic.APIStatusError) -> Exception:
    """A transient failure to retry, or a ModelError carrying the API's message."""
    kind = exc.type or "error"
    message = exc.api_message or exc.message
    if exc.status_code == 200:  # an `error` event in the middle of the stream
        if kind in CLIENT_ERROR_TYPES:
            return ModelError(f"{kind} mid-stream: {message}", retryable=False)
        return _Transient(f"{kind} mid-stream (status 200): {message}")
    if exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500:
        return _Transient(f"{exc.status_code} {kind}: {message}", _retry_after(exc))
    return ModelError(f"{exc.status_code} {kind}: {message}", retryable=False)


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers[name]) * scale)
        except (KeyError, ValueError):
            continue
    return None
