"""Tools for the cluster's e2e workload beside the inventory example's: a write
over two stock records (whose locks are in two partitions of the cluster's lock
table) and a write over one other record, so single-partition holders and
cross-partition requests meet on the same keys. Copied next to the example."""

import json
from pathlib import Path

from agentledger import ToolContext, ToolFailure, tool


def _both(args: dict) -> list[str]:
    return [f"stock:{args['from_sku']}", f"stock:{args['to_sku']}"]


@tool(writes=_both, scope="stock:write", timeout_s=10)
def move_stock(from_sku: str, to_sku: str, qty: int, ctx: ToolContext) -> dict:
    """Move `qty` available units from one SKU to another (one version step each)."""
    path = Path(ctx.workspace or ".", "stock.json")
    stock = json.loads(path.read_text())
    source, target = stock[from_sku], stock[to_sku]
    if source["available"] < qty:
        raise ToolFailure("conflict", f"only {source['available']} of {from_sku!r} available")
    source["available"] -= qty
    target["available"] += qty
    source["version"] += 1
    target["version"] += 1
    path.write_text(json.dumps(stock, indent=2) + "\n")
    return {"moved": qty, "from": source, "to": target}


@tool(writes=lambda a: [f"stock:{a['sku']}"], scope="stock:write", timeout_s=10)
def restock(sku: str, qty: int, ctx: ToolContext) -> dict:
    """Add `qty` available units to a SKU (one version step)."""
    path = Path(ctx.workspace or ".", "stock.json")
    stock = json.loads(path.read_text())
    stock[sku]["available"] += qty
    stock[sku]["version"] += 1
    path.write_text(json.dumps(stock, indent=2) + "\n")
    return {"sku": sku, **stock[sku]}
