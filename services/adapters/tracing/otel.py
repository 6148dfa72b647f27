"""The log's spans sent live with the OpenTelemetry SDK over OTLP/HTTP (the
exporter reads the standard `OTEL_EXPORTER_OTLP_*` variables itself), and the
tracer provider the model SDK's own request spans go through. Installed once
per process by the composition root when the settings ask for it; until then
`current.model_request_context` costs nothing.

A model request runs with its `chat` span (`agentledger.events.spans.chat_span_id`, known
before the reply is recorded) as the current span, so the anthropic SDK's span
of the HTTP call is its child in the same trace. That child is the request, not
a second model call: its `gen_ai.*` attributes (the operation name, the usage)
go out as `agentledger.sdk.gen_ai.*` (`NestedModelCalls`), so a backend counts
the call and its tokens once, on `chat`. The resource's `service.name` is
`OTEL_SERVICE_NAME` (or `OTEL_RESOURCE_ATTRIBUTES`', as the SDK reads them),
`agentledger` when neither names one."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from agentledger.services.extras import missing

try:  # the optional OpenTelemetry SDK and exporter (`agentledger[otel]`)
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags
except ImportError as exc:
    raise missing("otel", exc) from None

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

    def __init__(
        self,
        exporter: SpanExporter | None = None,
        *,
        version: str = "",
        sdk_exporter: SpanExporter | None = None,
    ) -> None:
        self.resource = service_resource()
        self.scope = InstrumentationScope(SCOPE, version)
        self._log_spans = BatchSpanProcessor(exporter or OTLPSpanExporter())
        self.provider = TracerProvider(resource=self.resource)
        nested = NestedModelCalls(sdk_exporter or OTLPSpanExporter())
        self.provider.add_span_processor(BatchSpanProcessor(nested))

    def send(self, spans: Sequence[Span], redactor: Redactor) -> None:
        for span in spans:
            self._log_spans.on_end(readable(span, self.resource, self.scope, redactor))

    def flush(self) -> None:
        self._log_spans.force_flush()
        self.provider.force_flush()

    def shutdown(self) -> None:
        self._log_spans.shutdown()  # type: ignore[no-untyped-call]
        self.provider.shutdown()


DEFAULT_SERVICE = "agentledger"


def service_resource() -> Resource:
    """The SDK's resource from the environment (`OTEL_SERVICE_NAME`,
    `OTEL_RESOURCE_ATTRIBUTES`), named `agentledger` when they name no service."""
    detected = Resource.create()
    name = str(detected.attributes.get("service.name", ""))
    if name and not name.startswith("unknown_service"):
        return detected
    return detected.merge(Resource({"service.name": DEFAULT_SERVICE}))


_CHATS: OrderedDict[int, None] = OrderedDict()  # the chat spans made current lately
_CHATS_LOCK = threading.Lock()
KEEP_CHATS = 4096
SDK_PREFIX = "agentledger.sdk."


class NestedModelCalls(SpanExporter):
    """Exports the SDKs' spans, each made inside one of our `chat` spans as the
    request it is: its `gen_ai.*` attributes renamed `agentledger.sdk.gen_ai.*`."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([_as_request(s) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _as_request(span: ReadableSpan) -> ReadableSpan:
    parent = span.parent
    with _CHATS_LOCK:
        nested = parent is not None and parent.span_id in _CHATS
    if not nested or not any(k.startswith("gen_ai.") for k in span.attributes or {}):
        return span
    attributes = {
        (SDK_PREFIX + k if k.startswith("gen_ai.") else k): v
        for k, v in (span.attributes or {}).items()
    }
    return ReadableSpan(
        name=span.name, context=span.context, parent=parent, resource=span.resource,
        attributes=attributes, events=span.events, links=span.links, kind=span.kind,
        status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )  # fmt: skip


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
    with _CHATS_LOCK:
        _CHATS[int(span_id, 16)] = None
        while len(_CHATS) > KEEP_CHATS:
            _CHATS.popitem(last=False)
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
