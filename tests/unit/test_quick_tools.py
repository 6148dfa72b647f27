"""A tool declared quick (`@tool(read_only=True, quick=True)`) runs on the thread
that carries its run, with no hand-off to a tool thread; a stop asked for before
it starts still keeps it from running, and one that overran its timeout is
recorded as timed out (its cancel flag set) and is handed to a thread of its own
from then on, where its timeout and a cancel interrupt the wait for it."""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import pytest

from agentledger import ToolContext
from agentledger.events.tool_step import Stopped, Succeeded, TimedOut
from agentledger.services.adapters.tools.registry import REGISTRY, RegisteredTool, tool
from agentledger.services.adapters.tools.runner import run_tool

RAN: list[int] = []  # the thread each call of `where_am_i` ran on
MARK: contextvars.ContextVar[str] = contextvars.ContextVar("quick_test_mark", default="caller's")
GATE = threading.Event()  # `stuck` waits for it
ENTERED = threading.Event()


@tool(read_only=True, quick=True, name="quick_where_test")
def where_am_i(ctx: ToolContext) -> dict[str, Any]:
    """Says nothing; notes the thread it ran on."""
    RAN.append(threading.get_ident())
    MARK.set("the tool's")  # as a tool's own logging scope would
    return {"ok": True}


@tool(read_only=True, quick=True, timeout_s=0.05, name="quick_stuck_test")
def stuck(ctx: ToolContext) -> dict[str, Any]:
    """Declared quick, but waits for the test's gate (or its cancel flag)."""
    ENTERED.set()
    while not GATE.wait(0.01):
        ctx.check_cancelled()  # a stopped call ends as cancelled
    return {"ok": True}


def _tool(name: str) -> RegisteredTool:
    return next(t for t in REGISTRY.of_module(__name__) if t.spec.name == name)


def _ctx() -> ToolContext:
    return ToolContext(run_id="run-q", call_id="c1", workspace=None, principal_id="u", tenant="t")


def test_a_quick_tool_runs_on_the_calling_thread() -> None:
    RAN.clear()
    outcome = run_tool(_tool("quick_where_test"), {}, _ctx(), timeout_s=5.0)
    assert outcome == Succeeded({"ok": True})
    assert RAN == [threading.get_ident()]
    assert MARK.get() == "caller's", "what the tool set leaked into the carrying thread"


def test_a_quick_tool_is_not_run_once_its_run_asked_to_stop() -> None:
    RAN.clear()
    ctx = _ctx()
    outcome = run_tool(
        _tool("quick_where_test"), {}, ctx, timeout_s=5.0, stop_requested=lambda: 123.0
    )
    assert isinstance(outcome, Stopped) and outcome.requested_at == 123.0
    assert not outcome.killed
    assert RAN == [], "ran although its run had asked its calls to stop"
    assert ctx.cancelled.is_set()


def test_a_quick_tool_that_overran_is_timed_out_then_threaded_where_timeout_and_cancel_hold() -> (
    None
):
    t = _tool("quick_stuck_test")
    GATE.clear()
    # 1. on the calling thread: nothing can interrupt it; it is timed out when it returns
    ctx = _ctx()
    threading.Timer(0.3, GATE.set).start()
    assert run_tool(t, {}, ctx, timeout_s=0.05) == TimedOut(after_s=0.05)
    assert ctx.cancelled.is_set()
    # 2. from now on in a thread of its own: its timeout ends the wait while it still runs
    GATE.clear()
    ENTERED.clear()
    try:
        ctx = _ctx()
        assert run_tool(t, {}, ctx, timeout_s=0.05) == TimedOut(after_s=0.05)
        assert not GATE.is_set(), "the call was waited for to the end"
        assert ENTERED.wait(5), "it ran (in its thread)"
        # 3. and a cancel asked for while it runs stops it (its cancel flag seen)
        ctx, asked = _ctx(), threading.Event()
        threading.Timer(0.1, asked.set).start()
        outcome = run_tool(
            t, {}, ctx, timeout_s=30.0, stop_requested=lambda: 7.0 if asked.is_set() else None
        )
        assert isinstance(outcome, Stopped) and outcome.requested_at == 7.0
        assert not GATE.is_set()
    finally:
        GATE.set()


def test_a_write_cannot_be_declared_quick() -> None:
    with pytest.raises(ValueError, match="quick=True is for read-only tools"):
        tool(quick=True)(lambda: None)
