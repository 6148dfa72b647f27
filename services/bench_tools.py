"""The tool `make bench` calls: a read-only no-op, so a benchmark run measures
the orchestration around a tool call and nothing the tool itself does."""

from __future__ import annotations

from services.tools import tool


@tool(read_only=True)
def bench_noop(n: int = 0) -> dict[str, int]:
    """Return the number it was given; reads and writes nothing."""
    return {"n": n}
