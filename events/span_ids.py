"""The ids of a run's trace and spans: digests of the run id (and turn, attempt,
call id, sampling request), so the same log gives the same ids wherever it is read
and a worker knows a `chat` span's id before the span is written."""

from __future__ import annotations

import hashlib


def trace_id_of(run_id: str) -> str:
    return _digest("trace", run_id, size=32)


def run_span_id(run_id: str) -> str:
    return _digest("invoke_agent", run_id, size=16)


def chat_span_id(run_id: str, turn: int, attempt: int) -> str:
    """The id of the `chat` span of a model request (known before it is recorded)."""
    return _digest("chat", run_id, str(turn), str(attempt), size=16)


def tool_span_id(run_id: str, call_id: str) -> str:
    return _digest("execute_tool", run_id, call_id, size=16)


def _digest(*parts: str, size: int) -> str:
    text = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:size]
    return text if text.strip("0") else "1".rjust(size, "0")  # an all-zero id is invalid


def sampled_span_id(run_id: str, sample: int) -> str:
    """The id of the `chat` span of an MCP server's n-th sampling request in the run."""
    return _digest("chat-sampled", run_id, str(sample), size=16)
