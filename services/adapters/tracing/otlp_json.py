"""The log's spans in the OTLP JSON encoding (the body of `POST /v1/traces`):
ids as hex, times as nanosecond strings, kinds and status codes as numbers. A
span still open (a live run) ends at the last event read and says so in the
attribute `agentledger.span.open`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentledger.events.spans import Attributes, AttrValue, Span, SpanKind

SCOPE = "agentledger"
KIND = {SpanKind.INTERNAL: 1, SpanKind.CLIENT: 3}
STATUS_OK, STATUS_ERROR = 1, 2


def otlp_json(
    spans: Sequence[Span], *, service: str = "agentledger", version: str = ""
) -> dict[str, Any]:
    last = max((t for s in spans for t in (s.start, s.end) if t is not None), default=0.0)
    return {
        "resourceSpans": [{
            "resource": {"attributes": attributes({"service.name": service})},
            "scopeSpans": [{
                "scope": {"name": SCOPE, "version": version},
                "spans": [_span(s, last) for s in spans],
            }],
        }]
    }  # fmt: skip


def _span(s: Span, last: float) -> dict[str, Any]:
    attrs = dict(s.attributes)
    if s.end is None:
        attrs["agentledger.span.open"] = True
    out: dict[str, Any] = {
        "traceId": s.trace_id,
        "spanId": s.span_id,
        "name": s.name,
        "kind": KIND[s.kind],
        "startTimeUnixNano": str(nanos(s.start)),
        "endTimeUnixNano": str(nanos(s.end if s.end is not None else last)),
        "attributes": attributes(attrs),
        "events": [
            {
                "timeUnixNano": str(nanos(e.at)),
                "name": e.name,
                "attributes": attributes(e.attributes),
            }
            for e in s.events
        ],
        "status": {"code": STATUS_OK}
        if s.error is None
        else {"code": STATUS_ERROR, "message": s.error},
    }
    if s.parent_id is not None:
        out["parentSpanId"] = s.parent_id
    return out


def nanos(at: float) -> int:
    return round(at * 1_000_000_000)


def attributes(attrs: Attributes) -> list[dict[str, Any]]:
    return [{"key": k, "value": value(v)} for k, v in attrs.items()]


def value(v: AttrValue) -> dict[str, Any]:
    match v:
        case bool():
            return {"boolValue": v}
        case int():
            return {"intValue": str(v)}
        case float():
            return {"doubleValue": v}
        case str():
            return {"stringValue": v}
    return {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
