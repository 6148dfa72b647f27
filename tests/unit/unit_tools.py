"""Tools of the handler unit tests, loaded as a worker's tool set. Each counts
its executions here, at the tool's side (`RAN`), and a call may be held at a
named gate (`GATES`) until the test opens it, so a test can look at a run while
one of its calls is running."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from functools import cache
from typing import Any

from agentledger import Lookup, ToolCancelled, ToolContext, ToolFailure, check, tool

log = logging.getLogger("unit_tools")
RAN: Counter[str] = Counter()  # call id -> executions
GATES: dict[str, threading.Event] = {}
HELD_S = 10.0  # a gate never opened fails the test, not the machine


def gate(name: str) -> threading.Event:
    return GATES.setdefault(name, threading.Event())


def _enter(ctx: ToolContext, at: str) -> None:
    RAN[ctx.call_id] += 1
    if at and not gate(at).wait(HELD_S):
        raise ToolFailure("internal", f"gate {at!r} was never opened")


@tool(read_only=True, reads=lambda a: [f"kv:{a['key']}"])
def kv_read(key: str, ctx: ToolContext, at: str = "") -> dict[str, Any]:
    """Read a key."""
    _enter(ctx, at)
    return {"key": key, "value": "v"}


@tool(writes=lambda a: [f"kv:{a['key']}"], timeout_s=5.0)
def kv_write(key: str, value: str, ctx: ToolContext, at: str = "") -> dict[str, Any]:
    """Write a key."""
    _enter(ctx, at)
    return {"key": key, "written": value}


@tool(
    read_only=True,
    limits=[{"key": "svc:pay", "max": 1}, {"key": "tenant:{tenant}:acct:{acct}", "max": 5}],
)
def pay(acct: str, ctx: ToolContext, at: str = "", busy_s: float = 0.0) -> dict[str, Any]:
    """Pay from an account (a service that allows one call at a time); `busy_s`: the
    service answers "rate limited, retry after busy_s"."""
    _enter(ctx, at)
    if busy_s:
        raise ToolFailure("rate_limited", "slow down", retry_after_s=busy_s)
    return {"acct": acct, "paid": True}


@tool(writes=lambda a: [f"order:{a['order']}"], key_fields=["order"])
def place_order(order: str, qty: int, ctx: ToolContext) -> dict[str, Any]:
    """Place an order (its business key is the order id)."""
    _enter(ctx, "")
    return {"order": order, "qty": qty, "placed": True}


@tool(writes=lambda a: [f"kv:{a['key']}"])
def kv_refuse(key: str, ctx: ToolContext) -> dict[str, Any]:
    """A write the target refuses."""
    _enter(ctx, "")
    raise ToolFailure("conflict", f"{key} is locked by its owner", retryable=False)


@tool(writes=lambda a: [f"kv:{a['key']}"])
def kv_odd_failure(key: str, ctx: ToolContext) -> dict[str, Any]:
    """A write that fails with an error code no model is told of."""
    _enter(ctx, "")
    raise ToolFailure("on_fire", f"{key} is on fire")  # type: ignore[arg-type]


@tool(read_only=True, reads=lambda a: [f"kv:{a['key']}"])
def kv_ratio(key: str, ctx: ToolContext) -> dict[str, Any]:
    """A read with a bug: it logs, then divides by zero."""
    _enter(ctx, "")
    log.info("reading the ratio of %s", key)
    return {"key": key, "ratio": len(key) / 0}


@tool(writes=lambda a: [f"kv:{a['key']}"], approval="always")
def kv_delete(key: str, ctx: ToolContext) -> dict[str, Any]:
    """Delete a key (a person approves every delete)."""
    _enter(ctx, "")
    return {"key": key, "deleted": True}


@tool(writes=lambda a: [f"kv:{a['key']}"])
def kv_slow_write(key: str, ctx: ToolContext) -> dict[str, Any]:
    """A write that goes on until it is told to stop, and then stops."""
    _enter(ctx, "")
    if ctx.cancelled.wait(HELD_S):
        raise ToolCancelled()
    return {"key": key, "written": "slowly"}


COMMITTED: dict[str, Any] = {}  # op key -> result: the target's own record of what happened
STALL: dict[str, str] = {}  # key -> "before" or "after" the commit: the next call stalls there


def lookup_commit(op_key: str, args: dict[str, Any], ctx: ToolContext) -> Lookup:
    """Asks the target itself whether the operation happened."""
    found = COMMITTED.get(op_key)
    return Lookup(done=True, result=found) if found is not None else Lookup(done=False)


@tool(writes=lambda a: [f"kv:{a['key']}"], lookup=lookup_commit)
def kv_commit(key: str, value: str, ctx: ToolContext) -> dict[str, Any]:
    """A write its target can be asked about. A call told to stall waits at the gate
    named after its call id: before committing it then gives up, after it answers."""
    RAN[ctx.call_id] += 1
    stall = STALL.pop(key, "")
    if stall == "before":
        gate(ctx.call_id).wait(HELD_S)
        raise ToolFailure("internal", "gave up before committing", retryable=True)
    assert ctx.op_key is not None
    result = {"key": key, "committed": value}
    COMMITTED[ctx.op_key] = result
    if stall == "after":
        gate(ctx.call_id).wait(HELD_S)
    return result


@check
def kv_ready(workspace: str | None) -> tuple[bool, dict[str, Any]]:
    """An acceptance check (`python: unit_tools:kv_ready`): declared, so it is called."""
    return True, {"workspace": workspace}


def not_declared(workspace: str | None) -> bool:
    """A plain function of the tool module: a `python:` check never calls it."""
    RAN["not_declared"] += 1
    return True


@cache
def numbered_text(chars: int) -> str:
    """`chars` characters in which every position can be told apart: 10-character
    lines of their own offset (a window read at the wrong place shows it)."""
    lines = "".join(f"{i:09d}\n" for i in range(0, chars, 10))
    return lines[:chars]


@tool(read_only=True, output_cap=None)
def big_output(chars: int, ctx: ToolContext) -> str:
    """Returns `chars` characters (numbered lines), and declares no output cap."""
    RAN[ctx.call_id] += 1
    return numbered_text(chars)


@tool(read_only=True)
def big_failure(chars: int, ctx: ToolContext) -> str:
    """Fails with a message of `chars` characters."""
    raise ToolFailure("not_found", numbered_text(chars))
