"""The span a model request runs under: its `chat` span. Log lines written
meanwhile name it (`structured_logs.SPAN_ID`); once tracing is installed
(`otel.install`) it is also OpenTelemetry's current span, so the model SDK's own
span is its child. Before that nothing of OpenTelemetry is imported, so the hot
path pays nothing when traces are off."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from agentledger.events.spans import chat_span_id
from agentledger.services.structured_logs import SPAN_ID

Enter = Callable[[str, int, int], AbstractContextManager[None]]
_enter: Enter | None = None


def set_model_request_context(enter: Enter | None) -> None:
    global _enter
    _enter = enter


@contextmanager
def model_request_context(run_id: str, turn: int, attempt: int) -> Iterator[None]:
    """While the model is called: its `chat` span is the current span."""
    token = SPAN_ID.set(chat_span_id(run_id, turn, attempt))
    try:
        if _enter is None:
            yield
        else:
            with _enter(run_id, turn, attempt):
                yield
    finally:
        SPAN_ID.reset(token)
