"""The span a model request runs under: its `chat` span, once tracing is
installed (`otel.install`); before that a no-op that imports nothing of
OpenTelemetry, so the hot path pays nothing when traces are off."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

Enter = Callable[[str, int, int], AbstractContextManager[None]]
_enter: Enter | None = None


def set_model_request_context(enter: Enter | None) -> None:
    global _enter
    _enter = enter


def model_request_context(run_id: str, turn: int, attempt: int) -> AbstractContextManager[None]:
    """While the model is called: its `chat` span is the current span (when tracing is on)."""
    return nullcontext() if _enter is None else _enter(run_id, turn, attempt)
