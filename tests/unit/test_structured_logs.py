"""JSON log lines: every record carries run id, call id, pool and worker (null
when none), set around each message by the middleware; the message and the
traceback are redacted by the same filter as text lines."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from agentledger.services import structured_logs
from agentledger.services.adapters.broker.log_context import LogContext, context_middleware
from agentledger.services.secrets import RedactingFilter

KEY = "sk-ant-api03-" + "x" * 24


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(structured_logs.JsonLines())
    secrets = RedactingFilter()
    secrets.learn({"MY_TOKEN": "hunter2-secret"})
    handler.addFilter(secrets)
    log = logging.getLogger("test_structured_logs")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.DEBUG)
    structured_logs.set_worker("host:1:abc")
    yield log, out
    log.removeHandler(handler)


def records(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_record_outside_any_message_names_the_worker_and_no_run(lines) -> None:  # type: ignore[no-untyped-def]
    log, out = lines
    log.warning("hello %s", "there")
    (r,) = records(out)
    assert r["message"] == "hello there" and r["level"] == "warning"
    assert (r["run_id"], r["call_id"], r["pool"], r["worker"]) == (None, None, None, "host:1:abc")


def test_a_record_inside_a_message_names_its_run_call_and_pool(lines) -> None:  # type: ignore[no-untyped-def]
    log, out = lines
    broker = SimpleNamespace(routes={"q.tools": SimpleNamespace(pool="tools")})
    message = SimpleNamespace(args=("r-1.s3", "c7"), queue_name="q.tools")
    middleware = LogContext()
    middleware.before_process_message(broker, message)
    log.info("inside")
    middleware.after_process_message(broker, message)
    log.info("after")
    inside, after = records(out)
    assert (inside["run_id"], inside["call_id"], inside["pool"]) == ("r-1.s3", "c7", "tools")
    assert (after["run_id"], after["call_id"], after["pool"]) == (None, None, None)


def test_secrets_are_redacted_in_the_message_and_the_traceback(lines) -> None:  # type: ignore[no-untyped-def]
    log, out = lines
    try:
        raise ValueError(f"bad key {KEY} and hunter2-secret")
    except ValueError:
        log.exception("failed with %s", KEY)
    (r,) = records(out)
    text = json.dumps(r)
    assert KEY not in text and "hunter2-secret" not in text
    assert "[REDACTED:MY_TOKEN]" in str(r["traceback"]) and "REDACTED" in str(r["message"])
    assert "ValueError" in str(r["traceback"])


def test_child_processes_get_the_chosen_level_and_format() -> None:
    before = structured_logs.child_args()
    try:
        structured_logs._CHOSEN.update(level="info", format="json")
        assert structured_logs.child_args() == ["--log-level", "info", "--log-format", "json"]
        assert [type(m) for m in context_middleware()] == [LogContext]
        structured_logs._CHOSEN.update(format="text")
        assert context_middleware() == []
    finally:
        structured_logs._CHOSEN.update(level=before[1], format=before[3])


def test_a_record_inside_a_span_names_the_runs_trace_and_that_span(lines) -> None:  # type: ignore[no-untyped-def]
    from agentledger.events.spans import chat_span_id, run_span_id, tool_span_id, trace_id_of
    from agentledger.services.adapters.tracing.current import model_request_context

    log, out = lines
    log.info("no run")
    with structured_logs.scope("r-1.s3", "c7", "tools"):
        log.info("in a tool call")
    with structured_logs.scope("r-1.s3", None, "model"):
        with model_request_context("r-1.s3", 2, 1):
            log.info("while the model answers")
        log.info("after the request")
    none, tool, chat, after = records(out)
    assert (none["trace_id"], none["span_id"]) == (None, None)
    assert {tool["trace_id"], chat["trace_id"], after["trace_id"]} == {trace_id_of("r-1.s3")}
    assert tool["span_id"] == tool_span_id("r-1.s3", "c7")
    assert chat["span_id"] == chat_span_id("r-1.s3", 2, 1)
    assert after["span_id"] == run_span_id("r-1.s3")
