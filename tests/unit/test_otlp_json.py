"""The log's spans as OTLP JSON (`agentledger.services.adapters.tracing.otlp_json`)."""

from __future__ import annotations

from journeys import approval_asked_last, happy_path

from agentledger.events.spans import spans_of
from agentledger.services.adapters.tracing.otlp_json import otlp_json, value


def test_values_take_the_otlp_json_shapes() -> None:
    assert value(True) == {"boolValue": True}
    assert value(3) == {"intValue": "3"}  # int64 as a string
    assert value(0.5) == {"doubleValue": 0.5}
    assert value("x") == {"stringValue": "x"}
    assert value(("a", "b")) == {
        "arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}
    }


def test_a_finished_trace_has_hex_ids_nanosecond_strings_and_ok_or_error_status() -> None:
    body = otlp_json(spans_of(happy_path().envelopes))
    (resource,) = body["resourceSpans"]
    assert {"key": "service.name", "value": {"stringValue": "agentledger"}} in resource["resource"][
        "attributes"
    ]
    spans = resource["scopeSpans"][0]["spans"]
    root = spans[0]
    assert "parentSpanId" not in root and len(root["traceId"]) == 32 and len(root["spanId"]) == 16
    assert all(s["parentSpanId"] == root["spanId"] for s in spans[1:])
    assert all(int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]) for s in spans)
    assert {s["status"]["code"] for s in spans} == {1}
    assert [s["kind"] for s in spans] == [1, 3, 1, 1, 3]  # internal, then client for chat


def test_a_live_runs_open_spans_end_at_the_last_event_and_say_they_are_open() -> None:
    log = approval_asked_last()
    spans = otlp_json(spans_of(log.envelopes))["resourceSpans"][0]["scopeSpans"][0]["spans"]
    open_ = [
        s
        for s in spans
        if {"key": "agentledger.span.open", "value": {"boolValue": True}} in s["attributes"]
    ]
    assert open_ and open_[0]["name"] == "invoke_agent agentledger"
    assert all(int(s["endTimeUnixNano"]) == round(log.envelopes[-1].at * 1e9) for s in open_)
