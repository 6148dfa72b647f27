"""A local stand-in of the Anthropic Messages API, for tests.

A threaded HTTP server on 127.0.0.1 (a free port) that the real SDK talks to
through `base_url`. It plays a queue of scripted replies to `POST
/v1/messages`: SSE streams built from content blocks (text, tool_use with its
JSON in `input_json_delta` fragments — the first one empty —, thinking with a
`signature_delta`, redacted_thinking), any stop reason, a max_tokens cut in
the middle of a tool call's JSON, an `error` event mid-stream, a stream that
just stops, and HTTP errors with `retry-after`. Every request is recorded
(headers and JSON body) so a test can assert on what the SDK sent."""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "claude-standin-1"
NOTHING_LEFT = "the stand-in has no scripted reply left"


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]
    cut_at: int | None = None  # send only this many characters of the input JSON


@dataclass(frozen=True)
class Thinking:
    thinking: str
    signature: str


@dataclass(frozen=True)
class RedactedThinking:
    data: str


Block = Text | ToolUse | Thinking | RedactedThinking


@dataclass(frozen=True)
class Streamed:
    """A 200 SSE stream of one message."""

    content: tuple[Block, ...]
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    model: str = MODEL
    usage: dict[str, int] = field(
        default_factory=lambda: {
            "input_tokens": 12,
            "output_tokens": 7,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
    )
    error: dict[str, str] | None = None  # {"type", "message"}: an `error` event after the blocks
    drop: bool = False  # end the body after the blocks, with no message_delta / message_stop


@dataclass(frozen=True)
class Failed:
    """An HTTP error response, as the API sends it."""

    status: int
    type: str
    message: str
    retry_after: float | None = None


Reply = Streamed | Failed


def cut(content: tuple[Block, ...], *, model: str = MODEL) -> Streamed:
    """A message stopped by max_tokens (a ToolUse in it may carry `cut_at`)."""
    return Streamed(content, stop_reason="max_tokens", model=model)


def mid_stream_error(kind: str = "overloaded_error", message: str = "Overloaded") -> Streamed:
    return Streamed((Text("Let me"),), error={"type": kind, "message": message})


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    raw: bytes
    body: Any


def _chunks(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: Block) -> list[tuple[str, dict[str, Any]]]:
    match block:
        case Text(text):
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(text)]
        case ToolUse(id, name, tool_input, cut_at):
            start = {"type": "tool_use", "id": id, "name": name, "input": {}}
            raw = json.dumps(tool_input)[:cut_at]
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in ["", *_chunks(raw)]]
        case Thinking(thinking, signature):
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(thinking)]
            deltas.append({"type": "signature_delta", "signature": signature})
        case RedactedThinking(data):
            start, deltas = {"type": "redacted_thinking", "data": data}, []
    events = [("content_block_start", {"index": index, "content_block": start})]
    events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
    return [*events, ("content_block_stop", {"index": index})]


def sse_events(reply: Streamed, message_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of a streamed message, in order."""
    usage = reply.usage
    start_usage = {**usage, "output_tokens": 1}
    message: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant"}
    message |= {"model": reply.model, "content": [], "stop_reason": None, "stop_sequence": None}
    message["usage"] = start_usage
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": message})]
    events.append(("ping", {}))
    for index, block in enumerate(reply.content):
        events += _block_events(index, block)
    if reply.error is not None:
        return [*events, ("error", {"error": reply.error})]
    if reply.drop:
        return events
    delta = {"stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence}
    events.append(
        ("message_delta", {"delta": delta, "usage": {"output_tokens": usage["output_tokens"]}})
    )
    return [*events, ("message_stop", {})]


class MessagesStandin:
    """Use as a context manager; `url` is the base_url to give the SDK."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.standin = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def play(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def _next(self, recorded: Recorded) -> tuple[int, Reply]:
        with self._lock:
            self.requests.append(recorded)
            if recorded.path != "/v1/messages":
                return len(self.requests), Failed(404, "not_found_error", f"no {recorded.path!r}")
            if not self._replies:
                return len(self.requests), Failed(400, "invalid_request_error", NOTHING_LEFT)
            return len(self.requests), self._replies.popleft()

    def __enter__(self) -> MessagesStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes, as SSE may

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output clean

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        recorded = Recorded("POST", self.path, headers, raw, json.loads(raw or b"null"))
        number, reply = self.server.standin._next(recorded)  # type: ignore[attr-defined]
        if isinstance(reply, Failed):
            self._fail(reply)
        else:
            self._stream(reply, f"msg_standin_{number:04d}")

    def _fail(self, reply: Failed) -> None:
        body = {"type": "error", "error": {"type": reply.type, "message": reply.message}}
        data = json.dumps(body).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_standin")
        if reply.retry_after is not None:
            self.send_header("retry-after", str(reply.retry_after))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, reply: Streamed, message_id: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_standin")
        self.end_headers()
        for name, data in sse_events(reply, message_id):
            payload = json.dumps({"type": name, **data})
            self.wfile.write(f"event: {name}\ndata: {payload}\n\n".encode())
            self.wfile.flush()
