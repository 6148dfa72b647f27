"""The log's spans sent live with the OpenTelemetry SDK over OTLP/HTTP (the
exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables itself), and the
tracer provider the model SDK's own request spans go through. Installed once
per process by the composition root when the settings ask for it; until then
`current.model_request_context` costs nothing.

A model request runs with its `chat` span (`agentledger.events.spans.chat_span_id`, known
before the reply is recorded) as the current span, so the anthropic SDK's span
of the HTTP call is its child in the same trace."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from agentledger.events.redact import Redactor
from agentledger.events.spans import (
    Attributes,
    AttrValue,
    Span,
    SpanKind,
    chat_span_id,
    trace_id_of,
)
from agentledger.services.adapters.tracing.current import set_model_request_context
from agentledger.services.adapters.tracing.otlp_json import SCOPE, nanos

log = logging.getLogger(__name__)
_KIND = {SpanKind.INTERNAL: trace.SpanKind.INTERNAL, SpanKind.CLIENT: trace.SpanKind.CLIENT}


class Tracing:
    """One process's exporters: the log's spans through a batch processor of
    their own, the SDKs' spans through the global tracer provider."""

    def __init__(self, exporter: SpanExporter | None = None, *, version: str = "") -> None:
        self.resource = Resource.create({"service.name": "agentledger"})
        self.scope = InstrumentationScope(SCOPE, version)
        self._log_spans = BatchSpanProcessor(exporter or OTLPSpanExporter())
        self.provider = TracerProvider(resource=self.resource)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))

    def send(self, spans: Sequence[Span], redactor: Redactor) -> None:
        for span in spans:
            self._log_spans.on_end(readable(span, self.resource, self.scope, redactor))

    def flush(self) -> None:
        self._log_spans.force_flush()
        self.provider.force_flush()

    def shutdown(self) -> None:
        self._log_spans.shutdown()  # type: ignore[no-untyped-call]
        self.provider.shutdown()


_installed: Tracing | None = None


def install(version: str = "") -> Tracing:
    """This process's tracing (made once); the global tracer provider is set to it."""
    global _installed
    if _installed is None:
        _installed = Tracing(version=version)
        trace.set_tracer_provider(_installed.provider)
        set_model_request_context(_chat_current)
    return _installed


@contextmanager
def _chat_current(run_id: str, turn: int, attempt: int) -> Iterator[None]:
    span_id = chat_span_id(run_id, turn, attempt)
    parent = NonRecordingSpan(_context(trace_id_of(run_id), span_id))
    token = otel_context.attach(trace.set_span_in_context(parent))
    try:
        yield
    finally:
        otel_context.detach(token)


def _context(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )  # fmt: skip


def readable(
    span: Span, resource: Resource, scope: InstrumentationScope, redactor: Redactor
) -> ReadableSpan:
    """An ended span of the log as the SDK's exporters take it."""
    assert span.end is not None, "only ended spans are sent"
    status = (
        Status(StatusCode.OK)
        if span.error is None
        else Status(StatusCode.ERROR, redactor.text(span.error))
    )
    parent = _context(span.trace_id, span.parent_id) if span.parent_id else None
    return ReadableSpan(
        name=span.name,
        context=_context(span.trace_id, span.span_id),
        parent=parent,
        resource=resource,
        attributes=_clean(span.attributes, redactor),
        events=[Event(e.name, _clean(e.attributes, redactor), nanos(e.at)) for e in span.events],
        kind=_KIND[span.kind],
        status=status,
        start_time=nanos(span.start),
        end_time=nanos(span.end),
        instrumentation_scope=scope,
    )


def _clean(attributes: Attributes, redactor: Redactor) -> dict[str, AttrValue]:
    def one(v: AttrValue) -> AttrValue:
        if isinstance(v, str):
            return redactor.text(v)
        if isinstance(v, tuple):
            return tuple(redactor.text(x) for x in v)
        return v

    return {k: one(v) for k, v in attributes.items()}
