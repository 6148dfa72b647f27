"""Runs a registered tool with its timeout, watching for a request to stop, and
turns what happened into an outcome for the core.

A Python tool runs in a thread of its own while it runs (one kept from an
earlier call that returned, else a new one: `threads`). On timeout the call is recorded as timed
out and its cancel flag set; Python cannot kill a thread, so it is left to
finish. When the run is cancelled the tool's cancel flag is set and its
subprocesses get SIGTERM; whatever still runs after the grace period gets
SIGKILL. A tool that stopped by itself is `cancelled`; one that had to be
killed is `force_terminated`; a thread that would not stop is reported as
still running (its outcome unknown).

What the tool prints goes to the call's own capture, never to the worker's
output, and is recorded on its outcome (bounded); its commands (`ctx.run`) run
in the sandbox, with the network only when the tool declares `network=True`.
An unexpected exception (the tool's own bug) is a failed call the model is told
about in one line; its traceback's last frames go on the outcome (the log holds
them, redacted as the rest of it, never the model) and into one log line naming
the run, the call, the tool and the pool."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agentledger.events.tool_step import (
    Errored,
    Outcome,
    Printed,
    StillRunning,
    Stopped,
    Succeeded,
    TimedOut,
)
from agentledger.events.types import ToolError
from agentledger.schemas.codec import pack
from agentledger.schemas.errors import InvalidEvent
from agentledger.services.adapters.tools import registry, threads
from agentledger.services.adapters.tools.capture import Captured, capturing
from agentledger.services.adapters.tools.registry import (
    ExternalTool,
    RegisteredTool,
    ToolCancelled,
    ToolContext,
    ToolFailure,
)
from agentledger.services.structured_logs import POOL

log = logging.getLogger(__name__)
POLL_S = 0.05
TRACEBACK_FRAMES = 8  # the innermost frames of a tool's unexpected exception are kept
TRACEBACK_CHARS = 4000  # and at most this much of their text (its end)
_CALLERS = frozenset({__file__, registry.__file__})  # our frames above a tool's own


def run_tool(
    t: RegisteredTool,
    raw_input: dict[str, Any],
    ctx: ToolContext,
    *,
    timeout_s: float,
    stop_requested: Callable[[], float | None] = lambda: None,
    grace_s: float = 5.0,
) -> Outcome:
    args, errors = t.check(raw_input)
    if errors:  # validated before, but a tool module may have changed since
        what = "; ".join(f"{e.loc}: {e.msg}" for e in errors)
        return Errored(
            ToolError(code="invalid_arguments", message=what, retryable=False, fields=tuple(errors))
        )
    if isinstance(t, ExternalTool):
        return t.execute(
            args, ctx, timeout_s=timeout_s, stop_requested=stop_requested, grace_s=grace_s
        )
    if (ctx.network, ctx.read_only) != (t.network, t.spec.read_only):
        # what the tool declared; the same cancel flag and processes
        ctx = dataclasses.replace(ctx, network=t.network, read_only=t.spec.read_only)
    if t.quick and t.fn not in _OVERRAN:
        return _inline(t, args, ctx, timeout_s, stop_requested)
    box: dict[str, Outcome] = {}
    context = contextvars.copy_context()  # the caller's log context (run, call, pool) goes along
    thread = threads.start(lambda: box.setdefault("o", context.run(_call, t, args, ctx)))
    deadline = time.monotonic() + timeout_s
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(POLL_S)
        if thread.is_alive() and (requested_at := stop_requested()) is not None:
            return _stop(thread, box, ctx, grace_s, requested_at)
    if thread.is_alive():
        ctx.cancelled.set()
        ctx.signal_processes(signal.SIGKILL)
        return TimedOut(after_s=timeout_s)
    return box["o"]


_OVERRAN: set[Callable[..., Any]] = set()  # the functions of quick tools that overran: threaded now


def _inline(
    t: RegisteredTool,
    args: dict[str, Any],
    ctx: ToolContext,
    timeout_s: float,
    stop_requested: Callable[[], float | None],
) -> Outcome:
    """A quick tool, on this thread (no hand-off: a tenth of a no-op call's CPU). A run
    asked to stop before it starts does not run it; one that overran its timeout is
    recorded as timed out (its cancel flag set, as a thread's would be) and is handed
    to a thread of its own from then on, where its timeout and a cancel interrupt the
    wait for it."""
    if (requested_at := stop_requested()) is not None:
        ctx.cancelled.set()
        return Stopped(requested_at, killed=False, detail="stopped before it started")
    started = time.monotonic()
    outcome = contextvars.copy_context().run(_call, t, args, ctx)  # what it sets stays its own
    if time.monotonic() - started > timeout_s:
        _OVERRAN.add(t.fn)
        ctx.cancelled.set()
        log.warning(
            "quick tool %r overran its timeout of %gs: it runs in a thread of its own from now on",
            t.spec.name, timeout_s,
        )  # fmt: skip
        return TimedOut(after_s=timeout_s)
    return outcome


def _stop(
    thread: threads.Job,
    box: dict[str, Outcome],
    ctx: ToolContext,
    grace_s: float,
    requested_at: float,
) -> Outcome:
    """`requested_at` is when the stop was asked for (the log's time), not when we noticed."""
    ctx.cancelled.set()
    termed = ctx.signal_processes(signal.SIGTERM)
    thread.join(grace_s)
    if not thread.is_alive():
        outcome = box["o"]
        # it finished anyway: a real result is recorded as such, it happened
        if isinstance(outcome, Succeeded):
            return outcome
        asked = f"cancel flag set, SIGTERM to {termed} command(s)" if termed else "cancel flag set"
        return Stopped(requested_at, killed=False, detail=asked)
    killed = ctx.signal_processes(signal.SIGKILL)
    thread.join(1.0)
    if killed and not thread.is_alive():
        return Stopped(
            requested_at,
            killed=True,
            detail=f"SIGTERM to {termed}, then SIGKILL to {killed} command(s) after {grace_s:g}s",
        )
    return StillRunning(requested_at)


def _call(t: RegisteredTool, args: dict[str, Any], ctx: ToolContext) -> Outcome:
    with capturing() as captured:
        outcome = _outcome(t, args, ctx)
    printed = _printed(captured)
    match outcome:
        case Succeeded() | Errored() if printed.stdout or printed.stderr:
            return dataclasses.replace(outcome, printed=printed)
    return outcome


def _outcome(t: RegisteredTool, args: dict[str, Any], ctx: ToolContext) -> Outcome:
    try:
        output = t.call(args, ctx)
    except ToolFailure as f:
        return Errored(_failure(f))
    except ToolCancelled:
        return Stopped(time.time(), killed=False)
    except Exception as exc:  # noqa: BLE001 -- a tool's own bug is an outcome the model is told about
        return _raised(t, ctx, exc)
    try:
        pack(json.loads(json.dumps(output)))  # what the log and the model will hold
    except (TypeError, ValueError, InvalidEvent) as exc:
        message = f"output cannot be recorded as JSON: {exc}"
        return Errored(ToolError(code="internal", message=message, retryable=False))
    return Succeeded(output)


def _raised(t: RegisteredTool, ctx: ToolContext, exc: Exception) -> Errored:
    """A tool's unexpected exception: one line for the model, its traceback for the
    log, and one log line with the ids (they ride on the record for JSON lines too)."""
    pool = POOL.get()
    log.warning(
        "tool %r raised %s in run %s, call %s (pool %s)", t.spec.name, type(exc).__name__,
        ctx.run_id, ctx.call_id, pool, exc_info=exc,
        extra={"run_id": ctx.run_id, "call_id": ctx.call_id, "pool": pool},
    )  # fmt: skip
    message = f"{type(exc).__name__}: {exc}"
    return Errored(
        ToolError(code="internal", message=message, retryable=False), traceback=last_frames(exc)
    )


def last_frames(exc: BaseException) -> str:
    """The exception's traceback from the tool's own code on (not ours, that called
    it): its innermost TRACEBACK_FRAMES frames, the text's last TRACEBACK_CHARS
    characters (`…` in front when cut)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in _CALLERS:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb, limit=-TRACEBACK_FRAMES)
    text = "".join(lines).rstrip()
    return text if len(text) <= TRACEBACK_CHARS else "…" + text[-(TRACEBACK_CHARS - 1) :]


def _failure(f: ToolFailure) -> ToolError:
    try:
        return ToolError(
            code=f.code, message=f.message, retryable=f.retryable, retry_after_s=f.retry_after_s
        )
    except ValidationError:  # an error code (or message) outside the vocabulary: the tool's bug
        message = f"the tool failed with an error the log cannot hold: {f.code!r}: {f.message!r}"
        return ToolError(code="internal", message=message, retryable=False)


def _printed(captured: Captured) -> Printed:
    return Printed(
        stdout=captured.stdout.text() or None,
        stderr=captured.stderr.text() or None,
    )
