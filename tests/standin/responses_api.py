"""A local stand-in of the OpenAI Responses API, for tests.

A threaded HTTP server on 127.0.0.1 (a free port) that the real `openai` SDK
talks to through `base_url` (`url`, which ends in `/v1`). It plays a queue of
scripted replies to `POST /v1/responses`, in the shapes OpenAI sends them:

- a `Turn` of output items — reasoning (its summary streamed as one summary
  part; its `encrypted_content` only when the request's `include` asks for
  "reasoning.encrypted_content"), assistant text in `output_text.delta`
  fragments, a refusal in `refusal.delta` fragments, function calls with their
  arguments in `function_call_arguments.delta` fragments — streamed as SSE
  (`event: <type>` / `data: <json>`, every event with its `type` and an
  increasing `sequence_number`) between `response.created` +
  `response.in_progress` and one final `response.completed`,
  `response.incomplete` (a `max_output_tokens` cut, possibly in the middle of a
  call's arguments: `FunctionCall.cut_at`) or `response.failed` (with the
  response's `error`); or a stream that just stops after its items (`drop`),
  or one that ends with an `error` event in the shape the live API sends it
  (`stream_error`). A request that does not say `stream: true` gets the final
  response object as JSON (a failed turn: an HTTP 500).
- HTTP errors as the API sends them (`Failed`, with `retry-after`), a
  connection closed with no answer (`Hangup`), and `GET /v1/models` listing
  `MODEL`.

It checks two things of a request, as OpenAI does, and answers 400 without
playing (or using up) a scripted reply when one fails: with `"store": false`
every input item of type "reasoning" must carry its `encrypted_content` (there
is no stored item to find by id); and every `function_call_output` must name
the `call_id` of a `function_call` input item before it (or in the context of
a `previous_response_id` the stand-in answered). They catch an adapter that
drops reasoning items or misorders tool outputs. Every request is recorded
(headers and JSON body) so a test can assert on what the SDK sent."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

MODEL = "gpt-standin-r1"
NOTHING_LEFT = "the stand-in has no scripted reply left"
ENCRYPTED_INCLUDE = "reasoning.encrypted_content"

DEFAULT_USAGE: dict[str, Any] = {
    "input_tokens": 12,
    # cache_write_tokens: the SDK's (3.x) InputTokensDetails requires it next to cached_tokens
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 19,
}
DEFAULT_ERROR: dict[str, Any] = {
    "code": "server_error",
    "message": "An error occurred while processing your request.",
}


@dataclass(frozen=True)
class Reasoning:
    """A reasoning item: its summary ("" for none) and its encrypted content (None: none)."""

    summary: str = ""
    encrypted_content: str | None = "enc-standin-reasoning"


@dataclass(frozen=True)
class Say:
    """An assistant message of one output_text part."""

    text: str


@dataclass(frozen=True)
class Refuse:
    """An assistant message of one refusal part."""

    text: str


@dataclass(frozen=True)
class FunctionCall:
    """A function call. A dict of arguments is sent as its `json.dumps`, a str exactly as given."""

    name: str
    arguments: dict[str, Any] | str
    call_id: str | None = None  # None: one made up ("call_…"), the same for the same response
    # send only this many characters of the arguments, with no .done events for the call,
    # which the final response lists with those arguments and "status": "incomplete"
    cut_at: int | None = None

    @property
    def text(self) -> str:
        raw = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return raw[: self.cut_at]


Item = Reasoning | Say | Refuse | FunctionCall


@dataclass(frozen=True)
class Turn:
    """One response: streamed, or one JSON object when the request does not stream."""

    output: tuple[Item, ...]
    status: Literal["completed", "incomplete", "failed"] = "completed"
    incomplete_reason: str | None = None  # "max_output_tokens" or "content_filter"
    usage: dict[str, Any] | None = None  # None: DEFAULT_USAGE
    cached_tokens: int = 0  # as usage.input_tokens_details.cached_tokens, when > 0
    model: str = MODEL
    # {"code", "message"}: the failed response's error (a failed turn without one: DEFAULT_ERROR);
    # giving one makes the turn "failed" whatever its status
    error: dict[str, Any] | None = None
    drop: bool = False  # end the stream after the items, with no final event
    # {"type", "code", "message"}: end the stream after the items with an `error` event, its
    # fields nested under "error" as the live API sends them (not flat as its reference says)
    stream_error: dict[str, Any] | None = None
    delay_s: float = 0.0  # wait this long before answering (a slow model; a request in flight)

    @property
    def final_status(self) -> str:
        return "failed" if self.error is not None else self.status


@dataclass(frozen=True)
class Failed:
    """An HTTP error response, as the API sends it."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class Hangup:
    """The connection closed with no response at all (a proxy or a server going down)."""


Reply = Turn | Failed | Hangup


def cut(output: tuple[Item, ...], *, model: str = MODEL) -> Turn:
    """A response stopped by max_output_tokens (a FunctionCall in it may carry `cut_at`)."""
    return Turn(output, status="incomplete", incomplete_reason="max_output_tokens", model=model)


def failed(
    output: tuple[Item, ...] = (),
    code: str = "server_error",
    message: str = DEFAULT_ERROR["message"],
) -> Turn:
    """A response that failed after its items (`response.failed`, with its error)."""
    return Turn(output, status="failed", error={"code": code, "message": message})


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    raw: bytes
    body: Any


def _chunks(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("/".join(map(str, parts)).encode()).digest()


def response_id(number: int) -> str:
    """The id of the stand-in's `number`th response (1-based, counting every request)."""
    return "resp_" + _digest("response", number).hex()[:48]


def item_id(kind: str, rid: str, index: int) -> str:
    """An output item's id: "rs_…", "msg_…" or "fc_…" (the same for the same response)."""
    return f"{kind}_" + _digest(rid, index).hex()[:48]


def call_id(call: FunctionCall, rid: str, index: int) -> str:
    if call.call_id is not None:
        return call.call_id
    return "call_" + "".join(_ALNUM[b % len(_ALNUM)] for b in _digest("call", rid, index)[:24])


def usage_of(turn: Turn) -> dict[str, Any]:
    usage = dict(turn.usage or DEFAULT_USAGE)
    if turn.cached_tokens > 0:
        details = dict(usage.get("input_tokens_details") or {})
        usage["input_tokens_details"] = details | {"cached_tokens": turn.cached_tokens}
    return usage


def _wants_encrypted(request: dict[str, Any]) -> bool:
    return ENCRYPTED_INCLUDE in (request.get("include") or [])


def output_items(turn: Turn, rid: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of the final response, as done (a cut call: partial, "incomplete")."""
    items: list[dict[str, Any]] = []
    for i, part in enumerate(turn.output):
        match part:
            case Reasoning(summary, encrypted):
                item: dict[str, Any] = {"type": "reasoning", "id": item_id("rs", rid, i)}
                item["summary"] = [{"type": "summary_text", "text": summary}] if summary else []
                item["encrypted_content"] = encrypted if _wants_encrypted(request) else None
            case Say(text):
                content = {"type": "output_text", "text": text, "annotations": []}
                item = _message(item_id("msg", rid, i), "completed", [content])
            case Refuse(text):
                content = {"type": "refusal", "refusal": text}
                item = _message(item_id("msg", rid, i), "completed", [content])
            case FunctionCall(name):
                item = {"type": "function_call", "id": item_id("fc", rid, i)}
                item |= {"call_id": call_id(part, rid, i), "name": name, "arguments": part.text}
                item["status"] = "completed" if part.cut_at is None else "incomplete"
        items.append(item)
    return items


def _message(mid: str, status: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    message = {"type": "message", "id": mid, "role": "assistant", "status": status}
    return message | {"content": content}


def response_object(
    turn: Turn,
    rid: str,
    request: dict[str, Any],
    *,
    created_at: int = 0,
    status: str | None = None,
) -> dict[str, Any]:
    """The response object: in progress (`status="in_progress"`: no output, no usage) or final."""
    final = status is None
    status = turn.final_status if final else status
    incomplete = None
    if final and status == "incomplete":
        incomplete = {"reason": turn.incomplete_reason or "max_output_tokens"}
    error = (turn.error or DEFAULT_ERROR) if final and status == "failed" else None
    reasoning = request.get("reasoning") or {}
    return {
        "id": rid,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "completed_at": created_at if status == "completed" else None,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "max_tool_calls": request.get("max_tool_calls"),
        "model": turn.model,
        "output": output_items(turn, rid, request) if final else [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "prompt_cache_key": request.get("prompt_cache_key"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": request.get("safety_identifier"),
        "service_tier": "default",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": request.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_logprobs": request.get("top_logprobs", 0),
        "top_p": request.get("top_p", 1.0),
        "truncation": request.get("truncation", "disabled"),
        "usage": usage_of(turn) if final else None,
        "user": request.get("user"),
        "metadata": request.get("metadata") or {},
    }


def _item_events(index: int, part: Item, done: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of one output item (without sequence numbers), `done` being its final form.

    A reasoning item is added with no summary and no encrypted content; its done form
    carries them (the encrypted content as the request's `include` says)."""
    at = {"item_id": done["id"], "output_index": index}
    match part:
        case Reasoning(summary):
            added = done | {"summary": [], "encrypted_content": None}
            events = [{"type": "response.output_item.added", "output_index": index, "item": added}]
            if summary:
                s = {**at, "summary_index": 0}
                piece = {"type": "summary_text", "text": summary}
                empty = {"type": "summary_text", "text": ""}
                events.append({"type": "response.reasoning_summary_part.added", **s, "part": empty})
                events += [
                    {"type": "response.reasoning_summary_text.delta", **s, "delta": c}
                    for c in _chunks(summary)
                ]
                events.append(
                    {"type": "response.reasoning_summary_text.done", **s, "text": summary}
                )
                events.append({"type": "response.reasoning_summary_part.done", **s, "part": piece})
        case Say(text):
            events = _message_events(index, done, at, "output_text", text)
        case Refuse(text):
            events = _message_events(index, done, at, "refusal", text)
        case FunctionCall():
            added = done | {"arguments": "", "status": "in_progress"}
            events = [{"type": "response.output_item.added", "output_index": index, "item": added}]
            events += [
                {"type": "response.function_call_arguments.delta", **at, "delta": c}
                for c in _chunks(part.text)
            ]
            if part.cut_at is not None:
                return events  # cut: no .done events
            events.append(
                {"type": "response.function_call_arguments.done", **at, "arguments": part.text}
            )
    return [*events, {"type": "response.output_item.done", "output_index": index, "item": done}]


def _message_events(
    index: int, done: dict[str, Any], at: dict[str, Any], kind: str, text: str
) -> list[dict[str, Any]]:
    added = done | {"status": "in_progress", "content": []}
    events = [{"type": "response.output_item.added", "output_index": index, "item": added}]
    c = {**at, "content_index": 0}
    if kind == "output_text":
        empty: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        deltas = [
            {"type": "response.output_text.delta", **c, "delta": d, "logprobs": []}
            for d in _chunks(text)
        ]
        text_done = {"type": "response.output_text.done", **c, "text": text, "logprobs": []}
    else:
        empty = {"type": "refusal", "refusal": ""}
        deltas = [{"type": "response.refusal.delta", **c, "delta": d} for d in _chunks(text)]
        text_done = {"type": "response.refusal.done", **c, "refusal": text}
    events.append({"type": "response.content_part.added", **c, "part": empty})
    events += [*deltas, text_done]
    events.append({"type": "response.content_part.done", **c, "part": done["content"][0]})
    return events


def stream_events(
    turn: Turn, rid: str, request: dict[str, Any], *, created_at: int = 0
) -> list[dict[str, Any]]:
    """The data of each SSE event of a streamed response, in order (each has its `type`)."""

    def lifecycle(kind: str, status: str | None = None) -> dict[str, Any]:
        response = response_object(turn, rid, request, created_at=created_at, status=status)
        return {"type": kind, "response": response}

    events = [lifecycle("response.created", "in_progress")]
    events.append(lifecycle("response.in_progress", "in_progress"))
    done_items = output_items(turn, rid, request)
    for index, (part, done) in enumerate(zip(turn.output, done_items, strict=True)):
        events += _item_events(index, part, done)
    if turn.stream_error is not None:
        events.append({"type": "error", "error": {"param": None} | turn.stream_error})
    elif not turn.drop:
        final = {"completed": "response.completed", "incomplete": "response.incomplete"}
        events.append(lifecycle(final.get(turn.final_status, "response.failed")))
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def check_input(request: dict[str, Any], context: list[Any]) -> Failed | None:
    """The 400 OpenAI answers for a reasoning item without its encrypted content in a
    stateless request, or a function_call_output with no function_call before it."""
    stateless = request.get("store") is False
    calls: set[Any] = {
        i.get("call_id")
        for i in context
        if isinstance(i, dict) and i.get("type") == "function_call"
    }
    items = request.get("input")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "reasoning" and stateless and not item.get("encrypted_content"):
            return Failed(
                400,
                f"Item '{item.get('id')}' of type 'reasoning' was provided without its"
                " required 'encrypted_content'",
            )
        if kind == "function_call":
            calls.add(item.get("call_id"))
        elif kind == "function_call_output" and item.get("call_id") not in calls:
            return Failed(
                400,
                f"No tool call found for function call output with call_id {item.get('call_id')}.",
            )
    return None


class ResponsesStandin:
    """Use as a context manager; `url` is the base_url to give the SDK."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._always: Reply | None = None  # played once the queue is empty
        # each answered response's context (input and output items), by id, for
        # a later request's previous_response_id
        self._contexts: dict[str, list[Any]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.standin = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def play(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def always(self, reply: Reply) -> None:
        """Answer every request after the queued ones with `reply` (an API that keeps failing)."""
        with self._lock:
            self._always = reply

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def _next(self, recorded: Recorded) -> tuple[int, Reply]:
        with self._lock:
            self.requests.append(recorded)
            n = len(self.requests)
            if recorded.path != "/v1/responses":
                return n, Failed(404, f"Invalid URL ({recorded.method} {recorded.path})")
            body = recorded.body if isinstance(recorded.body, dict) else {}
            previous = self._contexts.get(body.get("previous_response_id") or "", [])
            refused = check_input(body, previous)
            if refused is not None:
                return n, refused  # the scripted reply stays queued for the next request
            if self._replies:
                reply = self._replies.popleft()
            elif self._always is not None:
                reply = self._always
            else:
                return n, Failed(400, NOTHING_LEFT)
            if isinstance(reply, Turn):
                rid = response_id(n)
                items = body.get("input")
                inputs = items if isinstance(items, list) else []
                self._contexts[rid] = [*previous, *inputs, *output_items(reply, rid, body)]
            return n, reply

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def __enter__(self) -> ResponsesStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


MODELS = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "standin"}]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes, as SSE may

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output clean

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def do_GET(self) -> None:
        standin: ResponsesStandin = self.server.standin  # type: ignore[attr-defined]
        standin._record(Recorded("GET", self.path, self._headers(), b"", None))
        if self.path == "/v1/models":
            self._json(200, MODELS)
        else:
            self._fail(Failed(404, f"Invalid URL (GET {self.path})"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        recorded = Recorded("POST", self.path, self._headers(), raw, json.loads(raw or b"null"))
        number, reply = self.server.standin._next(recorded)  # type: ignore[attr-defined]
        body = recorded.body if isinstance(recorded.body, dict) else {}
        rid = response_id(number)
        if isinstance(reply, Turn):
            time.sleep(reply.delay_s)
        if isinstance(reply, Failed):
            self._fail(reply)
        elif isinstance(reply, Hangup):
            self.close_connection = True  # nothing written: the client reads an empty answer
        elif body.get("stream"):
            self._stream(stream_events(reply, rid, body, created_at=int(time.time())))
        elif reply.drop:
            self.close_connection = True  # a dropped answer that does not stream is no answer
        elif reply.final_status == "failed" or reply.stream_error is not None:
            error = reply.stream_error or reply.error or DEFAULT_ERROR
            self._fail(Failed(500, error["message"], "server_error", error.get("code")))
        else:
            self._json(200, response_object(reply, rid, body, created_at=int(time.time())))

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, reply: Failed) -> None:
        error = {"message": reply.message, "type": reply.type, "param": None, "code": reply.code}
        headers = {} if reply.retry_after is None else {"retry-after": f"{reply.retry_after:g}"}
        self._json(reply.status, {"error": error}, headers)

    def _stream(self, events: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
