"""The Chat Completions API's wire shapes, as plain JSON: the request we send and
the reply we rebuild from the stream's chunks. No SDK here (the adapter hands the
chunks in as dicts), so what every OpenAI-compatible server sends is read as it
came, whichever of their known differences it has.

The log keeps the project's own blocks (`agentledger.schemas.content`): a reply's
reasoning (`reasoning_content` of vLLM and DeepSeek-style servers, `reasoning` of
Ollama's) is a `reasoning` block holding its text and the field it came in, kept
whatever the spec says and sent back only when it asks (`send_reasoning`); its
text is a text block; a refusal (`refusal`) is a `refusal` block; each tool call
a tool_use block with the call's id (one made up, `call_<turn>_<n>`, for a server
that sent none or the same twice, the id it sent kept as `wire_id`) and its
arguments parsed strictly: a call whose arguments did not arrive whole (cut by
`length`) is never to be executed. The finish reason, the completion's id and the
server's fingerprint are the reply's `stop_details`, verbatim.

`finish_reason` maps to our stop reasons without losing any: `stop` is end_turn,
or tool_use when the reply carries calls (older Ollama says `stop` with calls);
`tool_calls` and the older `function_call` are tool_use; `length` is max_tokens;
`content_filter`, or a `refusal`, is a refusal; anything else is a malformed
reply. Usage: `prompt_tokens` less the cached ones is input, the cached ones are
cache reads; a stream without usage (Ollama's) is estimated at ~4 characters a
token, from the request's view and the reply, and says so in `stop_details`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentledger.events.context_view import tool_definition
from agentledger.events.model_reach import reach_refusals
from agentledger.events.types import StopReason
from agentledger.schemas.content import (
    ContentBlock,
    Message,
    ProviderBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from agentledger.schemas.openai_spec import OpenAIModel, OpenAISettings
from agentledger.services.adapters.models.failures import Incomplete
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest
from agentledger.services.settings import Settings

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # OpenAI's own, when the spec names none
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"  # the key's variable, when the spec names none
REASONING_FIELDS = ("reasoning_content", "reasoning")  # vLLM/DeepSeek's, Ollama's
CHARS_PER_TOKEN = 4
FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def endpoint_of(spec: OpenAIModel, settings: Settings) -> tuple[str, str | None, str, str | None]:
    """(base URL, the field that named it, the key's variable, the key): the spec's own
    only when the deployment lists them (`agentledger.events.model_reach`; else
    ModelError, not_configured). The default variable must be listed too."""
    variable = spec.openai.api_key_env or DEFAULT_KEY_VARIABLE
    refused = reach_refusals(
        "model.openai", spec.openai.base_url, variable,
        urls=settings.model_endpoints, variables=settings.model_key_var_names,
    )  # fmt: skip
    if refused:
        where, reason = refused[0]
        raise ModelError(f"{where}: {reason}", kind="not_configured")
    named = "model.openai.base_url" if spec.openai.base_url else None
    return spec.openai.base_url or DEFAULT_BASE_URL, named, variable, settings.model_key(variable)


def is_openai_own(base_url: str) -> bool:
    return base_url.rstrip("/") == DEFAULT_BASE_URL


def speaks_responses(settings: OpenAISettings, base_url: str | None = None) -> bool:
    """Whether requests go to the Responses API (`api`; `auto`: at OpenAI's own)."""
    if settings.api != "auto":
        return settings.api == "responses"
    return is_openai_own(base_url or settings.base_url or DEFAULT_BASE_URL)


def wire_body(
    settings: OpenAISettings, request: ModelRequest, *, base_url: str | None = None
) -> dict[str, Any]:
    """The body as it is sent, to whichever API the spec speaks."""
    if speaks_responses(settings, base_url):
        from agentledger.services.adapters.models.openai_responses import request_body

        return request_body(settings, request)
    return request_params(settings, request, base_url=base_url)


def request_params(
    settings: OpenAISettings, request: ModelRequest, *, base_url: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create(stream=True)` for one request."""
    system = "\n\n".join(s for s in (settings.system, request.system) if s)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in request.messages:
        messages += to_wire(m, send_reasoning=settings.send_reasoning)
    own = is_openai_own(base_url or settings.base_url or DEFAULT_BASE_URL)
    params: dict[str, Any] = {
        "model": request.model or settings.model,
        "messages": messages,
        # OpenAI's own reasoning models take only max_completion_tokens; servers of its
        # API's older shape (vLLM, Ollama, llama.cpp) read max_tokens
        ("max_completion_tokens" if own else "max_tokens"): request.output_limit(
            settings.max_tokens
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = [function_tool(tool_definition(t)) for t in request.tools]
    if tools:
        params["tools"] = tools
        if settings.parallel_tool_calls is not None:
            params["parallel_tool_calls"] = settings.parallel_tool_calls
    for name in ("temperature", "reasoning_effort"):
        if (value := getattr(settings, name)) is not None:
            params[name] = value
    return params


def function_tool(definition: dict[str, Any]) -> dict[str, Any]:
    """One of our tool definitions (name, description, input_schema) as a function tool."""
    function = {"name": definition["name"], "parameters": definition.get("input_schema") or {}}
    if definition.get("description"):
        function["description"] = definition["description"]
    return {"type": "function", "function": function}


def to_wire(m: Message, *, send_reasoning: bool = False) -> list[dict[str, Any]]:
    """One message of the log as Chat Completions messages: an assistant turn's text
    and calls in one message; a user turn's tool results first, each its own `tool`
    message answering its call, then its text (the API wants the answers right after
    the calls)."""
    if m.role == "assistant":
        return [_assistant(m.content, send_reasoning=send_reasoning)]
    answers, text = user_turn(m)
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": call_id, "content": said} for call_id, said in answers
    ]
    if text is not None:
        out.append({"role": "user", "content": text})
    return out


def user_turn(m: Message) -> tuple[list[tuple[str, str]], str | None]:
    """A user turn as both OpenAI APIs take it: its tool answers (call id, text; an
    error says so) first, in order, then its text (None: none)."""
    answers = [
        (
            b.tool_use_id,
            (
                f"Error: {b.content}"
                if b.is_error and not b.content.startswith("Error")
                else b.content
            )
            + _images_left_out(b),
        )
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]
    texts = [b.text for b in m.content if isinstance(b, TextBlock)]
    return answers, "\n\n".join(texts) if texts else None


def _images_left_out(b: ToolResultBlock) -> str:
    """A tool's images, said to be there: these APIs take no image in a tool's answer."""
    if not b.images:
        return ""
    kinds = ", ".join(i.media_type for i in b.images)
    return f"\n[{len(b.images)} image(s) not shown ({kinds}): this API takes no images in tool results]"


def _assistant(content: tuple[ContentBlock, ...], *, send_reasoning: bool) -> dict[str, Any]:
    texts = [b.text for b in content if isinstance(b, TextBlock)]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)},
        }
        for b in content
        if isinstance(b, ToolUseBlock)
    ]
    if calls:
        message["tool_calls"] = calls
    if send_reasoning:
        for b in content:
            if isinstance(b, ProviderBlock) and b.type == "reasoning":
                where = str(b.fields.get("field") or REASONING_FIELDS[0])
                message[where] = message.get(where, "") + str(b.fields.get("text") or "")
    return message


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""
    whole: Any = None  # arguments a server sent as an object, not a string


@dataclass
class ChunkLog:
    """The completion as the stream delivered it, chunk by chunk (as JSON dicts)."""

    started: bool = False
    model: str = ""
    completion_id: str | None = None
    fingerprint: str | None = None
    text: str = ""
    refusal: str = ""
    reasoning: dict[str, str] = field(default_factory=dict)  # by the field it came in
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    def see(self, chunk: dict[str, Any]) -> None:
        self.started = True
        self.model = str(chunk.get("model") or self.model)
        self.completion_id = chunk.get("id") or self.completion_id
        self.fingerprint = chunk.get("system_fingerprint") or self.fingerprint
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # we ask for one choice
            self._delta(choice.get("delta") or choice.get("message") or {})
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def _delta(self, delta: dict[str, Any]) -> None:
        self.text += delta.get("content") or ""
        self.refusal += delta.get("refusal") or ""
        for name in REASONING_FIELDS:
            if isinstance(delta.get(name), str) and delta[name]:
                self.reasoning[name] = self.reasoning.get(name, "") + delta[name]
        for position, part in enumerate(delta.get("tool_calls") or ()):
            index = part.get("index", position)
            call = self.calls.setdefault(index, _Call())
            call.id = call.id or str(part.get("id") or "")
            function = part.get("function") or {}
            call.name += function.get("name") or ""
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments += arguments
            elif arguments is not None:
                call.whole = arguments


def to_reply(log: ChunkLog, request: ModelRequest) -> ModelReply:
    """The reply the log keeps, from a stream that ended with its finish reason."""
    finish = log.finish_reason
    if not log.started or finish is None:
        raise Incomplete("the stream ended before the completion was complete")
    content: list[ContentBlock] = [
        ProviderBlock(type="reasoning", field=name, text=text)
        for name, text in log.reasoning.items()
    ]
    if log.text:
        content.append(TextBlock(text=log.text))
    if log.refusal:
        content.append(ProviderBlock(type="refusal", refusal=log.refusal))
    cut: list[tuple[str, str]] = []
    seen: set[str] = set()
    last = max(log.calls, default=-1)
    for n, index in enumerate(sorted(log.calls)):
        call = log.calls[index]
        use, raw = _tool_use(
            call, request.turn, n, seen, cut_off=finish == "length" and index == last
        )
        seen.add(use.id)
        if raw is not None:
            cut.append((use.id, raw))
        content.append(use)
    stop = _stop_reason(finish, bool(log.calls), bool(log.refusal))
    usage, estimated = _usage(log, request)
    details: dict[str, Any] = {"finish_reason": finish}
    details |= {"id": log.completion_id} if log.completion_id else {}
    details |= {"system_fingerprint": log.fingerprint} if log.fingerprint else {}
    details |= {"usage_estimated": True} if estimated else {}
    return ModelReply(
        content=tuple(content),
        stop_reason=stop,
        usage=usage,
        model=log.model or request.model or "",
        truncated_tool_use_ids=tuple(i for i, _ in cut),
        truncated_tool_json=tuple(cut),
        stop_details=details,
    )


def _stop_reason(finish: str, has_calls: bool, refused: bool) -> StopReason:
    if refused:
        return "refusal"
    stop = FINISH.get(finish)
    if stop is None:
        raise ModelError(f"unknown finish_reason {finish!r}", kind="malformed_reply")
    return "tool_use" if stop == "end_turn" and has_calls else stop


def _tool_use(
    call: _Call, turn: int, n: int, seen: set[str], *, cut_off: bool
) -> tuple[ToolUseBlock, str | None]:
    """The call as a tool_use block, and its raw arguments when they did not arrive whole."""
    given = call.id
    made = given if given and given not in seen else f"call_{turn}_{n}"
    extra: dict[str, Any] = {"wire_id": given} if made != given else {}
    arguments = _arguments(call, cut_off=cut_off)
    if not call.name:
        raise ModelError(
            f"the server sent a tool call with no name ({made})", kind="malformed_reply"
        )
    block = ToolUseBlock(id=made, name=call.name, input=arguments or {}, **extra)
    return block, (call.arguments if arguments is None else None)


def _arguments(call: _Call, *, cut_off: bool) -> dict[str, Any] | None:
    """The call's arguments, or None when they did not arrive whole; a server may send
    them as an object instead of its text."""
    if call.whole is not None:
        return call.whole if isinstance(call.whole, dict) else None
    return parse_arguments(call.arguments, cut_off=cut_off)


def parse_arguments(raw: str, *, cut_off: bool = False) -> dict[str, Any] | None:
    """A call's arguments text parsed strictly: None when it is not a whole JSON object.
    A server that sends "" for a call with none sends nothing to parse: {} (unless cut off)."""
    if raw.strip() == "":
        return None if cut_off else {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _usage(log: ChunkLog, request: ModelRequest) -> tuple[Usage, bool]:
    if log.usage is None:  # a server that sends none in a stream: estimated, and said so
        said = len(log.text) + len(log.refusal) + sum(len(t) for t in log.reasoning.values())
        said += sum(len(c.name) + len(c.arguments) for c in log.calls.values())
        prompt = request.context_tokens or 0
        return Usage(input_tokens=prompt, output_tokens=-(-said // CHARS_PER_TOKEN)), True
    u = log.usage
    details = u.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    prompt = int(u.get("prompt_tokens") or 0)
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_input_tokens=cached,
    ), False
