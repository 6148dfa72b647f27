"""Runs a registered tool with its timeout and turns what happened into an
outcome for the core. A Python tool runs in its own thread: on timeout the
call is recorded as timed out and its cancel flag is set; the thread is left
to finish by itself (Python cannot kill a thread)."""

from __future__ import annotations

import json
import threading
from typing import Any

from events.tool_step import Errored, Outcome, Succeeded, TimedOut
from events.types import ToolError
from schemas.codec import pack
from schemas.errors import InvalidEvent
from services.tools import RegisteredTool, ToolContext, ToolFailure


def run_tool(
    t: RegisteredTool, raw_input: dict[str, Any], ctx: ToolContext, *, timeout_s: float
) -> Outcome:
    args, errors = t.check(raw_input)
    if errors:  # validated before, but a tool module may have changed since
        what = "; ".join(f"{e.loc}: {e.msg}" for e in errors)
        return Errored(
            ToolError(code="invalid_arguments", message=what, retryable=False, fields=tuple(errors))
        )
    box: dict[str, Outcome] = {}

    def target() -> None:
        box["outcome"] = _call(t, args, ctx)

    thread = threading.Thread(target=target, name=f"tool-{t.spec.name}-{ctx.call_id}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        ctx.cancelled.set()
        return TimedOut(after_s=timeout_s)
    return box["outcome"]


def _call(t: RegisteredTool, args: dict[str, Any], ctx: ToolContext) -> Outcome:
    try:
        output = t.call(args, ctx)
    except ToolFailure as f:
        return Errored(ToolError(code=f.code, message=f.message, retryable=f.retryable))
    except Exception as exc:  # a tool's own bug is an outcome the model is told about
        return Errored(
            ToolError(code="internal", message=f"{type(exc).__name__}: {exc}", retryable=False)
        )
    try:
        pack(json.loads(json.dumps(output)))  # what the log and the model will hold
    except (TypeError, ValueError, InvalidEvent) as exc:
        message = f"output cannot be recorded as JSON: {exc}"
        return Errored(ToolError(code="internal", message=message, retryable=False))
    return Succeeded(output)
