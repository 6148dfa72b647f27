"""Inventory tools for the example: stock lives in the workspace's stock.json."""

import json

from agentledger import ToolContext, ToolFailure, WorkspaceFiles, tool

STOCK = "stock.json"


def _load(ctx: ToolContext) -> tuple[WorkspaceFiles, dict]:
    files = WorkspaceFiles.of(ctx)  # inside the run's workspace only, no link out
    return files, json.loads(files.read_text(STOCK).text)


def _record(args: dict, workspace: str | None) -> list[str]:
    """The stock record a call touches, named logically (the SKU), not by where
    this host keeps the file: calls from every host on the same SKU meet in the lock table."""
    return [f"stock:{args['sku']}"]


@tool(read_only=True, reads=_record, scope="stock:read")
def lookup_stock(sku: str, ctx: ToolContext) -> dict:
    """Available quantity for a SKU and the stock version it was read at; read-only, reserves nothing."""
    _, stock = _load(ctx)
    if sku not in stock:
        raise ToolFailure("not_found", f"no SKU {sku!r}")
    item = stock[sku]
    return {"sku": sku, "available": item["available"], "version": item["version"]}


@tool(writes=_record, scope="stock:write", timeout_s=10)
def reserve_stock(sku: str, qty: int, ctx: ToolContext) -> dict:
    """Reserve `qty` units of a SKU; fails with `conflict` when fewer are available."""
    files, stock = _load(ctx)
    if sku not in stock:
        raise ToolFailure("not_found", f"no SKU {sku!r}")
    if qty < 1:
        raise ToolFailure("invalid_arguments", "qty must be at least 1")
    item = stock[sku]
    if item["available"] < qty:
        raise ToolFailure("conflict", f"only {item['available']} of {sku!r} available")
    item["available"] -= qty
    item["reserved"] = item.get("reserved", 0) + qty
    item["version"] += 1
    files.write_text(STOCK, json.dumps(stock, indent=2) + "\n")
    return {"sku": sku, "reserved": qty, "available": item["available"], "version": item["version"]}
