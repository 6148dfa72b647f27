"""A local stand-in of the Anthropic Messages API, for tests.

A threaded HTTP server on 127.0.0.1 (a free port) that the real SDK talks to
through `base_url`. It plays a queue of scripted replies to `POST
/v1/messages`: SSE streams built from content blocks (text, with citations as
`citations_delta`s; tool_use and server_tool_use with their JSON in
`input_json_delta` fragments — the first one empty —; thinking with a
`signature_delta`, or cut before it; redacted_thinking; compaction; any other
block as raw JSON), any stop reason with its `stop_details`, a max_tokens cut
in the middle of a tool call's JSON, an `error` event mid-stream, a stream
that just stops, HTTP errors as the API sends them (401, 403, 429 and 529 with
`retry-after`, 500, …), a connection closed with no answer — or a recorded SSE
transcript sent byte for byte (`Transcript`, see `transcripts/`).

With `cache=True` it keeps a prompt cache as the API does: each request's
`cache_control` breakpoints (or the top-level automatic one) write the prefix
up to them; a later request whose prefix matches at a breakpoint, or up to 20
blocks before one, reads it. A reply without its own usage then reports
`input_tokens`, `cache_read_input_tokens` and `cache_creation_input_tokens`
(split by TTL) from that, at ~4 characters a token. Every request is recorded
(headers and JSON body) so a test can assert on what the SDK sent."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "claude-standin-1"
NOTHING_LEFT = "the stand-in has no scripted reply left"


TRANSCRIPTS = Path(__file__).with_name("transcripts")


@dataclass(frozen=True)
class Text:
    text: str
    citations: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]
    cut_at: int | None = None  # send only this many characters of the input JSON


@dataclass(frozen=True)
class ServerToolUse:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Thinking:
    thinking: str
    signature: str | None  # None: cut before its signature arrived


@dataclass(frozen=True)
class RedactedThinking:
    data: str


@dataclass(frozen=True)
class Compaction:
    content: str
    encrypted_content: str


@dataclass(frozen=True)
class Raw:
    """Any block, sent whole in its content_block_start (server tool results, fallback)."""

    block: dict[str, Any]


Block = Text | ToolUse | ServerToolUse | Thinking | RedactedThinking | Compaction | Raw


@dataclass(frozen=True)
class Streamed:
    """A 200 SSE stream of one message."""

    content: tuple[Block, ...]
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    model: str = MODEL
    usage: dict[str, Any] | None = None  # None: DEFAULT_USAGE, or the simulated cache's
    stop_details: dict[str, Any] | None = None
    error: dict[str, str] | None = None  # {"type", "message"}: an `error` event after the blocks
    drop: bool = False  # end the body after the blocks, with no message_delta / message_stop
    delay_s: float = 0.0  # wait this long before answering (a slow model; a request in flight)


@dataclass(frozen=True)
class Failed:
    """An HTTP error response, as the API sends it."""

    status: int
    type: str
    message: str
    retry_after: float | None = None


@dataclass(frozen=True)
class Hangup:
    """The connection closed with no response at all (a proxy or a server going down)."""


@dataclass(frozen=True)
class Transcript:
    """A recorded SSE stream, sent as it is (a file under transcripts/)."""

    sse: str

    @classmethod
    def named(cls, name: str) -> Transcript:
        return cls((TRANSCRIPTS / f"{name}.sse").read_text())


Reply = Streamed | Failed | Hangup | Transcript
DEFAULT_USAGE: dict[str, Any] = {
    "input_tokens": 12,
    "output_tokens": 7,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}


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
        case Text(text, citations):
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(text)]
            deltas += [{"type": "citations_delta", "citation": c} for c in citations]
        case ToolUse(id, name, tool_input, cut_at):
            start = {"type": "tool_use", "id": id, "name": name, "input": {}}
            raw = json.dumps(tool_input)[:cut_at]
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in ["", *_chunks(raw)]]
        case ServerToolUse(id, name, tool_input):
            start = {"type": "server_tool_use", "id": id, "name": name, "input": {}}
            raw = json.dumps(tool_input)
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in ["", *_chunks(raw)]]
        case Thinking(thinking, signature):
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(thinking)]
            if signature is not None:
                deltas.append({"type": "signature_delta", "signature": signature})
        case RedactedThinking(data):
            start, deltas = {"type": "redacted_thinking", "data": data}, []
        case Compaction(content, encrypted):
            start = {"type": "compaction", "content": None, "encrypted_content": None}
            deltas = [
                {"type": "compaction_delta", "content": content, "encrypted_content": encrypted}
            ]
        case Raw(raw_block):
            start, deltas = dict(raw_block), []
    events = [("content_block_start", {"index": index, "content_block": start})]
    events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
    return [*events, ("content_block_stop", {"index": index})]


def sse_events(
    reply: Streamed, message_id: str, usage: dict[str, Any] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of a streamed message, in order."""
    usage = reply.usage or usage or DEFAULT_USAGE
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
    if reply.stop_details is not None:
        delta["stop_details"] = reply.stop_details
    events.append(("message_delta", {"delta": delta, "usage": usage}))
    return [*events, ("message_stop", {})]


class MessagesStandin:
    """Use as a context manager; `url` is the base_url to give the SDK."""

    def __init__(self, *, cache: bool = False) -> None:
        self.requests: list[Recorded] = []
        self.usages: list[dict[str, Any]] = []  # the simulated usage of each request, with cache
        self._cache = PromptCache() if cache else None
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
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def play(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def always(self, reply: Reply) -> None:
        """Answer every request after the queued ones with `reply` (an API that keeps failing)."""
        with self._lock:
            self._always = reply

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def _next(self, recorded: Recorded) -> tuple[int, Reply, dict[str, Any] | None]:
        with self._lock:
            self.requests.append(recorded)
            n = len(self.requests)
            if recorded.path != "/v1/messages":
                return n, Failed(404, "not_found_error", f"no {recorded.path!r}"), None
            if not self._replies:
                if self._always is not None:
                    return n, self._always, None
                return n, Failed(400, "invalid_request_error", NOTHING_LEFT), None
            usage = None
            if self._cache is not None:
                usage = self._cache.usage(recorded.body)
                self.usages.append(usage)
            return n, self._replies.popleft(), usage

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
        number, reply, usage = self.server.standin._next(recorded)  # type: ignore[attr-defined]
        if isinstance(reply, Failed):
            self._fail(reply)
        elif isinstance(reply, Hangup):
            self.close_connection = True  # nothing written: the client reads an empty answer
        elif isinstance(reply, Transcript):
            self._send_sse(reply.sse.encode())
        else:
            self._stream(reply, f"msg_standin_{number:04d}", usage)

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

    def _stream(self, reply: Streamed, message_id: str, usage: dict[str, Any] | None) -> None:
        time.sleep(reply.delay_s)
        self._start_sse()
        for name, data in sse_events(reply, message_id, usage):
            payload = json.dumps({"type": name, **data})
            self.wfile.write(f"event: {name}\ndata: {payload}\n\n".encode())
            self.wfile.flush()

    def _send_sse(self, body: bytes) -> None:
        self._start_sse()
        self.wfile.write(body)
        self.wfile.flush()

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", "req_standin")
        self.end_headers()


LOOKBACK_BLOCKS = 20


class PromptCache:
    """The prompt cache as the API keeps it, simplified: prefixes (tools, then
    system, then message blocks, in order) written at breakpoints, read at a
    breakpoint or up to LOOKBACK_BLOCKS blocks before one; 4 characters a token."""

    def __init__(self) -> None:
        self._written: set[str] = set()

    def usage(self, body: dict[str, Any]) -> dict[str, Any]:
        parts, marks = _cache_parts(body)
        sizes, hashes, h = [0], [], hashlib.sha256()
        for part in parts:
            h.update(json.dumps(part, sort_keys=True).encode())
            hashes.append(h.copy().hexdigest())
            sizes.append(sizes[-1] + len(json.dumps(part)) // 4)
        read_at = 0
        for i, _ in marks:
            for j in range(i, max(-1, i - LOOKBACK_BLOCKS - 1), -1):
                if hashes[j] in self._written:
                    read_at = max(read_at, j + 1)
                    break
        last = max((i + 1 for i, _ in marks), default=0)
        created = max(0, sizes[last] - sizes[read_at])
        write_1h = created if marks and marks[-1][1] == "1h" else 0  # one TTL a request, here
        for i, _ in marks:
            self._written.add(hashes[i])
        return {
            "input_tokens": sizes[-1] - sizes[max(read_at, last)],
            "output_tokens": 7,
            "cache_read_input_tokens": sizes[read_at],
            "cache_creation_input_tokens": created,
            "cache_creation": {
                "ephemeral_5m_input_tokens": created - min(created, write_1h),
                "ephemeral_1h_input_tokens": min(created, write_1h),
            },
        }


def _cache_parts(body: dict[str, Any]) -> tuple[list[Any], list[tuple[int, str]]]:
    """The request's blocks in cache order, without their marks, and where the marks were."""
    system = body.get("system") or []
    system = [{"type": "text", "text": system}] if isinstance(system, str) else system
    blocks = [*(body.get("tools") or []), *system]
    blocks += [{"role": m["role"], **b} for m in body.get("messages", []) for b in m["content"]]
    parts, marks = [], []
    for i, b in enumerate(blocks):
        mark = b.get("cache_control")
        parts.append({k: v for k, v in b.items() if k != "cache_control"})
        if mark is not None:
            marks.append((i, mark.get("ttl", "5m")))
    auto = body.get("cache_control")
    if auto is not None and parts:
        marks.append((len(parts) - 1, auto.get("ttl", "5m")))
    return parts, marks
