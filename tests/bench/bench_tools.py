"""The tools `make bench` calls: a read-only no-op (declared quick: it runs on the
worker's thread, as a peer's no-op runs on its agent loop's), so a benchmark run measures
the orchestration around a tool call and nothing the tool itself does, and a
read-only sleep, so a worker can be killed while it holds a tool call."""

from __future__ import annotations

import time

from agentledger import tool


@tool(read_only=True, quick=True)
def bench_noop(n: int = 0) -> dict[str, int]:
    """Return the number it was given; reads and writes nothing."""
    return {"n": n}


@tool(read_only=True, timeout_s=2.0)
def bench_sleep(seconds: float = 1.0) -> dict[str, float]:
    """Sleep, then say how long; reads and writes nothing."""
    time.sleep(seconds)
    return {"slept_s": seconds}


@tool(read_only=True)
def bench_text(n: int = 0, chars: int = 1000) -> dict[str, object]:
    """Return the number it was given and `chars` characters of text (a tool
    result of a realistic size); reads and writes nothing."""
    return {"n": n, "text": f"{n:08d} " * (chars // 9) + "." * (chars % 9)}


@tool(read_only=True, approval="always")
def bench_approved(n: int = 0) -> dict[str, int]:
    """The no-op, but a person must approve each call first (the parked-runs row)."""
    return {"n": n}
