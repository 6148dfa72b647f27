"""A local stand-in of the OpenAI Chat Completions API, for tests.

A threaded HTTP server on 127.0.0.1 (a free port) that the real `openai` SDK
talks to through `base_url` (`url`, which ends in `/v1`). It plays a queue of
scripted replies to `POST /v1/chat/completions`, in the shapes the
OpenAI-compatible servers send them, as one of two flavours:

- "vllm": reasoning as `delta.reasoning_content`, each tool call opened with
  its id, name and empty arguments and then its arguments text in fragments,
  finish_reason "tool_calls" when there are calls, and a last usage chunk
  (`"choices": []`) when the request asks `stream_options.include_usage`;
- "ollama": reasoning as `delta.reasoning`, each tool call whole in one chunk,
  finish_reason "stop" even with calls (as older Ollama does), and never any
  usage in a stream.

A `Chat` is streamed (SSE `data:` lines, `[DONE]` at the end) when the request
says `stream: true`, else answered as one `chat.completion` object. It may be
cut by `length` in the middle of a call's arguments (`Call.cut_at`), carry a
tool call with an odd arguments string ("" for none) or an empty id
(llama.cpp-style), end with no finish_reason and no `[DONE]` (a dropped
connection), or carry an `error` chunk mid-stream as vLLM sends it. Besides:
HTTP errors as the API sends them (`Failed`, with `retry-after`), a connection
closed with no answer (`Hangup`), and `GET /v1/models` listing `MODEL`.
Every request is recorded (headers and JSON body) so a test can assert on
what the SDK sent."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

MODEL = "gpt-standin-1"
NOTHING_LEFT = "the stand-in has no scripted reply left"

Flavour = Literal["vllm", "ollama"]
DEFAULT_USAGE: dict[str, Any] = {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}


@dataclass(frozen=True)
class Call:
    """A tool call. A dict of arguments is sent as its `json.dumps`, a str exactly as given."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None  # None: the flavour makes one up; "": an empty id (llama.cpp-style)
    cut_at: int | None = None  # send only this many characters of the arguments text

    @property
    def text(self) -> str:
        raw = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return raw[: self.cut_at]


@dataclass(frozen=True)
class Chat:
    """One completion: streamed, or one JSON object when the request does not stream."""

    content: str | None = None
    calls: tuple[Call, ...] = ()
    reasoning: str | None = None
    refusal: str | None = None
    # "auto": the flavour's own (vllm: "tool_calls" with calls, else "stop"; ollama: "stop");
    # None: the stream ends with no finish_reason and no [DONE] (a dropped connection)
    finish_reason: str | None = "auto"
    flavour: Flavour = "vllm"
    usage: dict[str, Any] | None = None  # None: DEFAULT_USAGE
    cached_tokens: int = 0  # as usage.prompt_tokens_details.cached_tokens, when > 0
    model: str = MODEL
    # {"message", "type", "code"}: a chunk after the deltas, and the stream ends; when the
    # request does not stream, an HTTP 500 with that error (and finish_reason None: no answer)
    error: dict[str, Any] | None = None
    delay_s: float = 0.0  # wait this long before answering (a slow model; a request in flight)


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


Reply = Chat | Failed | Hangup


def cut(
    content: str | None,
    calls: tuple[Call, ...] = (),
    *,
    flavour: Flavour = "vllm",
    model: str = MODEL,
) -> Chat:
    """A completion stopped by max_tokens (a Call in it may carry `cut_at`)."""
    return Chat(content, calls, finish_reason="length", flavour=flavour, model=model)


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


def call_id(call: Call, flavour: Flavour, completion_id: str, index: int) -> str:
    """The call's own id, or the one its flavour makes up (the same for the same completion)."""
    if call.id is not None:
        return call.id
    digest = hashlib.sha256(f"{completion_id}/{index}".encode()).digest()
    if flavour == "ollama":
        return "call_" + "".join(_ALNUM[b % len(_ALNUM)] for b in digest[:8])
    return f"chatcmpl-tool-{digest.hex()[:32]}"


def finish_reason(reply: Chat) -> str | None:
    if reply.finish_reason != "auto":
        return reply.finish_reason
    return "tool_calls" if reply.calls and reply.flavour == "vllm" else "stop"


def usage_of(reply: Chat) -> dict[str, Any]:
    usage = dict(reply.usage or DEFAULT_USAGE)
    if reply.cached_tokens > 0:
        details = dict(usage.get("prompt_tokens_details") or {})
        usage["prompt_tokens_details"] = details | {"cached_tokens": reply.cached_tokens}
    return usage


def _reasoning_key(flavour: Flavour) -> str:
    return "reasoning" if flavour == "ollama" else "reasoning_content"


def _call_deltas(reply: Chat, completion_id: str) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = []
    for i, call in enumerate(reply.calls):
        opened = {"index": i, "id": call_id(call, reply.flavour, completion_id, i)}
        opened["type"] = "function"
        if reply.flavour == "ollama":
            opened["function"] = {"name": call.name, "arguments": call.text}
            deltas.append({"tool_calls": [opened]})
            continue
        opened["function"] = {"name": call.name, "arguments": ""}
        deltas.append({"tool_calls": [opened]})
        deltas += [
            {"tool_calls": [{"index": i, "function": {"arguments": c}}]} for c in _chunks(call.text)
        ]
    return deltas


def stream_chunks(
    reply: Chat, completion_id: str, *, include_usage: bool = False, created: int = 0
) -> list[dict[str, Any]]:
    """The data of each SSE line of a streamed completion, in order (without [DONE]).

    A mid-stream error is the last one, as `{"error": {...}}`."""
    usage_chunks = include_usage and reply.flavour == "vllm"
    head: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk"}
    head |= {"created": created, "model": reply.model}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}
        return {**head, "choices": [choice]} | ({"usage": None} if usage_chunks else {})

    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    key = _reasoning_key(reply.flavour)
    deltas += [{key: c} for c in _chunks(reply.reasoning or "")]
    deltas += [{"content": c} for c in _chunks(reply.content or "")]
    deltas += [{"refusal": c} for c in _chunks(reply.refusal or "")]
    deltas += _call_deltas(reply, completion_id)
    chunks = [chunk(d) for d in deltas]
    if reply.error is not None:
        return [*chunks, {"error": reply.error}]
    reason = finish_reason(reply)
    if reason is None:
        return chunks  # dropped: no finish_reason, no usage
    chunks.append(chunk({}, reason))
    if usage_chunks:
        chunks.append({**head, "choices": [], "usage": usage_of(reply)})
    return chunks


def completion_body(reply: Chat, completion_id: str, *, created: int = 0) -> dict[str, Any]:
    """The `chat.completion` object of a reply to a request that does not stream."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message[_reasoning_key(reply.flavour)] = reply.reasoning
    message["refusal"] = reply.refusal
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call_id(call, reply.flavour, completion_id, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call.text},
            }
            for i, call in enumerate(reply.calls)
        ]
    choice = {"index": 0, "message": message, "finish_reason": finish_reason(reply)}
    choice["logprobs"] = None
    body: dict[str, Any] = {"id": completion_id, "object": "chat.completion", "created": created}
    return body | {"model": reply.model, "choices": [choice], "usage": usage_of(reply)}


class ChatStandin:
    """Use as a context manager; `url` is the base_url to give the SDK."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._always: Reply | None = None  # played once the queue is empty
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
            if recorded.path != "/v1/chat/completions":
                return n, Failed(404, f"Invalid URL ({recorded.method} {recorded.path})")
            if not self._replies:
                if self._always is not None:
                    return n, self._always
                return n, Failed(400, NOTHING_LEFT)
            return n, self._replies.popleft()

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def __enter__(self) -> ChatStandin:
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
        standin: ChatStandin = self.server.standin  # type: ignore[attr-defined]
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
        completion_id = f"chatcmpl-standin-{number:04d}"
        if isinstance(reply, Chat):
            time.sleep(reply.delay_s)
        if isinstance(reply, Failed):
            self._fail(reply)
        elif isinstance(reply, Hangup):
            self.close_connection = True  # nothing written: the client reads an empty answer
        elif body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(reply, completion_id, include_usage)
        elif reply.error is not None:  # no stream to break: the error is the answer
            self._json(500, {"error": reply.error})
        elif finish_reason(reply) is None:
            self.close_connection = True  # a dropped answer that does not stream is no answer
        else:
            self._json(200, completion_body(reply, completion_id, created=int(time.time())))

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

    def _stream(self, reply: Chat, completion_id: str, include_usage: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        created = int(time.time())
        for data in stream_chunks(
            reply, completion_id, include_usage=include_usage, created=created
        ):
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        if reply.error is None and finish_reason(reply) is not None:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
