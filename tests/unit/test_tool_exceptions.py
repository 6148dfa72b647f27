"""A tool's unexpected exception is a failed call the model is told about in one
line; its traceback (from the tool's own frames on, bounded) is recorded on the
failed call and logged once, naming the run, the call, the tool and the pool. A
tool's own log lines carry its run, its call and the tools pool, on whichever
message's thread its step was carried."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from handlerkit import call, carrying, new_unit, spec

from agentledger import ToolContext
from agentledger.events.commands import RequestModel
from agentledger.events.tool_step import Errored
from agentledger.events.types import ToolCallFailed
from agentledger.services import structured_logs
from agentledger.services.adapters.tools.registry import REGISTRY, tool
from agentledger.services.adapters.tools.runner import TRACEBACK_CHARS, last_frames, run_tool

RUNNER = "agentledger.services.adapters.tools.runner"


@tool(read_only=True, name="divide_exception_test")
def divide(a: int, b: int) -> dict:
    """Divides, with no guard against zero."""
    return {"q": _quotient(a, b)}


def _quotient(a: int, b: int) -> float:
    return a / b


@dataclass(frozen=True)
class Seen:
    logger: str
    message: str
    ids: tuple[str | None, str | None, str | None]  # the context's run, call and pool
    extra: tuple[str | None, str | None, str | None]  # the record's own, if it carries them


class Watch(logging.Handler):
    """Every record of the watched loggers, with the ids its thread's context held."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[Seen] = []

    def emit(self, record: logging.LogRecord) -> None:
        ids = (
            structured_logs.RUN_ID.get(),
            structured_logs.CALL_ID.get(),
            structured_logs.POOL.get(),
        )
        extra = tuple(getattr(record, k, None) for k in ("run_id", "call_id", "pool"))
        self.seen.append(Seen(record.name, record.getMessage(), ids, extra))  # type: ignore[arg-type]


@pytest.fixture
def watch() -> Iterator[Watch]:
    handler = Watch()
    loggers = [logging.getLogger(n) for n in (RUNNER, "unit_tools")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    yield handler
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


def test_a_tools_exception_is_one_line_for_the_model_and_its_own_frames_for_the_log(
    watch: Watch,
) -> None:
    registered = next(
        t for t in REGISTRY.of_module(__name__) if t.spec.name == "divide_exception_test"
    )
    with structured_logs.scope("run-a", "c1", "tools"):
        outcome = run_tool(
            registered, {"a": 1, "b": 0}, ToolContext("run-a", "c1", None, "p", "t"), timeout_s=5
        )
    assert isinstance(outcome, Errored)
    assert outcome.error.message == "ZeroDivisionError: division by zero"
    assert outcome.traceback is not None
    assert outcome.traceback.startswith("Traceback (most recent call last):")
    assert "in divide" in outcome.traceback and "in _quotient" in outcome.traceback
    assert outcome.traceback.endswith("ZeroDivisionError: division by zero")
    assert "runner.py" not in outcome.traceback and "registry.py" not in outcome.traceback
    [logged] = [s for s in watch.seen if s.logger == RUNNER]
    assert (
        logged.message
        == "tool 'divide_exception_test' raised ZeroDivisionError in run run-a, call c1 (pool tools)"
    )
    assert logged.extra == ("run-a", "c1", "tools")


def test_a_deep_traceback_keeps_its_innermost_frames_and_its_end() -> None:
    def down(n: int) -> None:
        if n == 0:
            raise ValueError("x" * (2 * TRACEBACK_CHARS))
        down(n - 1)

    try:
        down(30)
    except ValueError as exc:
        told = last_frames(exc)
    assert len(told) == TRACEBACK_CHARS and told.startswith("…") and told.endswith("xxx")
    try:
        down(30)
    except ValueError as exc:
        exc.args = ("small",)
        short = last_frames(exc)
    assert "in down" in short and short.endswith("ValueError: small")
    assert "in test_a_deep_traceback" not in short, "the outermost frames are left out"


def test_a_carried_calls_exception_is_recorded_with_its_traceback_and_its_log_lines_name_the_call(
    tmp_path: Path, watch: Watch
) -> None:
    unit = new_unit(tmp_path / "ws", carry=carrying())
    unit.create(
        "run-a", spec({"tool_use": [call("c1", "kv_ratio", key="k")]}, {"end_turn": "done"})
    )
    unit.take()

    unit.deliver(RequestModel("run-a"))  # the model's message; the call is carried on its thread

    [failed] = [e.data for e in unit.store.read("run-a") if isinstance(e.data, ToolCallFailed)]
    assert failed.error.message == "ZeroDivisionError: division by zero"
    assert failed.traceback is not None and "in kv_ratio" in failed.traceback
    said = {s.logger: s for s in watch.seen}
    assert said["unit_tools"].message == "reading the ratio of k"
    assert said["unit_tools"].ids == ("run-a", "c1", "tools")
    assert said[RUNNER].ids == ("run-a", "c1", "tools") == said[RUNNER].extra
    assert [s.logger for s in watch.seen].count(RUNNER) == 1, "logged once"
    assert structured_logs.CALL_ID.get() is None and structured_logs.POOL.get() is None


def test_a_log_scope_ends_where_it_began() -> None:
    with structured_logs.scope("run-a", None, "model"):
        with structured_logs.scope("run-a", "c1", "tools"):
            assert structured_logs.CALL_ID.get() == "c1"
        assert (structured_logs.CALL_ID.get(), structured_logs.POOL.get()) == (None, "model")
    assert structured_logs.RUN_ID.get() is None
