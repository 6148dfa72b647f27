"""An MCP server written with the `mcp` SDK, for the tests: a small order book
kept in a JSON file in its folder (the workspace, or the folder given), so what
a write did can be checked from outside and looked up by operation key.

Tools: `get_order` (read), `place_order` (write; keeps the `agentledger/op_key`
it was sent under), `order_done` (the lookup: was an op key done?), `slow`
(sleeps; counts starts in `slow.count` so a test sees it began), `crash` (writes, then
dies before answering), `freeze` (hangs the whole server), `fail`
(an isError result), `mystery` (not listed by the tests' servers files),
`wipe` (annotated destructive), `grow` (adds a tool `grown` and says its
tools changed), `shaped` (declares an outputSchema and, asked to, breaks it),
`steps` (reports progress), `ask_model` (samples the client's model); a resource `ledger://book` and a template
`ledger://order/{order_id}`, a prompt `review`. Run: `python ledger_server.py stdio|http FOLDER [PORT]`."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, SamplingMessage, TextContent, ToolAnnotations

FOLDER = Path(sys.argv[2] if len(sys.argv) > 2 else ".").resolve()
BOOK = FOLDER / "orders.json"
server = MCPServer("ledger", version="1.2.3", log_level="ERROR")


def _book() -> dict[str, Any]:
    return json.loads(BOOK.read_text()) if BOOK.exists() else {}


def _op_key(ctx: Context) -> str | None:
    meta = ctx.request_context.meta
    found = (
        meta.get("agentledger/op_key")
        if isinstance(meta, dict)
        else getattr(meta, "agentledger/op_key", None)
    )
    return found if isinstance(found, str) else None


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_order(order_id: str) -> str:
    """The order's quantity, or 'none'."""
    found = _book().get(order_id)
    return json.dumps(found) if found else "none"


@server.tool()
def place_order(order_id: str, qty: int, ctx: Context) -> str:
    """Place (or replace) an order."""
    book = _book()
    book[order_id] = {
        "qty": qty,
        "op_key": _op_key(ctx),
        "times": book.get(order_id, {}).get("times", 0) + 1,
    }
    BOOK.write_text(json.dumps(book))
    return f"placed {order_id} x{qty}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def order_done(op_key: str) -> str:
    """Was a write with this operation key done? {"done": bool, "result": ...}"""
    for order_id, order in _book().items():
        if order.get("op_key") == op_key:
            return json.dumps({"done": True, "result": f"placed {order_id} x{order['qty']}"})
    return json.dumps({"done": False})


@server.tool()
async def slow(seconds: float, order_id: str = "slow") -> str:
    """Sleep, then place an order of 1. A cancel (notifications/cancelled) is noted in cancelled.txt."""
    count = FOLDER / "slow.count"
    count.write_text(str(int(count.read_text() or 0) + 1 if count.exists() else 1))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        (FOLDER / "cancelled.txt").write_text(order_id)
        raise
    book = _book()
    book[order_id] = {"qty": 1}
    BOOK.write_text(json.dumps(book))
    return "slept"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def freeze(seconds: float) -> str:
    """Block the server's whole event loop: it answers nothing, pings included."""
    time.sleep(seconds)
    return "thawed"


@server.tool()
def crash(order_id: str, ctx: Context) -> str:
    """Place an order of 1, then die before answering."""
    book = _book()
    book[order_id] = {
        "qty": 1,
        "op_key": _op_key(ctx),
        "times": book.get(order_id, {}).get("times", 0) + 1,
    }
    BOOK.write_text(json.dumps(book))
    os._exit(1)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail(why: str) -> str:
    """Always fails."""
    raise ToolError(f"not found: {why}")


@server.tool()
def mystery() -> str:
    """A tool the servers file does not list."""
    return "?"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=True))
def wipe() -> str:
    """Says it is read-only and destructive at once."""
    BOOK.unlink(missing_ok=True)
    return "wiped"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool `grown` and tell the client its tools changed."""
    server.add_tool(lambda: "grown", name="grown", description="Added while running.")
    await ctx.session.send_tool_list_changed()
    return "grew"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True), structured_output=False)
def shaped(good: bool) -> CallToolResult:
    """A total, as its outputSchema says; `good: false` breaks the schema."""
    total = 3 if good else "three"
    return CallToolResult(
        content=[TextContent(type="text", text=f"total {total}")],
        structured_content={"total": total},
    )


_SHAPE = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}
server._tool_manager.get_tool("shaped").fn_metadata.output_schema = _SHAPE  # type: ignore[union-attr]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def steps(n: int, ctx: Context) -> str:
    """Report progress n times, then answer."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
    return f"{n} steps"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def ask_model(tag: str, ctx: Context, wait_for: str = "") -> str:
    """Ask the client's model (sampling); first wait (up to 30 s) for the file `wait_for`,
    writing `asking-<tag>` so another call can wait for this one."""
    (FOLDER / f"asking-{tag}").write_text(tag)
    for _ in range(600):
        if not wait_for or (FOLDER / wait_for).exists():
            break
        await anyio.sleep(0.05)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"about {tag}"))
    try:
        answer = await ctx.session.create_message([message], max_tokens=20)
    except MCPError as exc:
        return f"refused: {exc}"
    content = answer.content
    return content.text if isinstance(content, TextContent) else "?"


@server.resource("ledger://book", mime_type="application/json")
def book() -> str:
    """The whole order book."""
    return json.dumps(_book())


@server.resource("ledger://order/{order_id}")
def order(order_id: str) -> str:
    """One order."""
    return json.dumps(_book().get(order_id))


@server.prompt()
def review(order_id: str) -> str:
    """Ask for a review of an order."""
    return f"Review order {order_id}: is its quantity right?"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        port = int(sys.argv[3]) if len(sys.argv) > 3 else 8931
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
