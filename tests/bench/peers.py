"""The peers, each measured in a process of its own (`peer_agents`), the same
scripted agent as ours. A peer whose framework is not installed (the optional
`bench` extra: `pip install -e '.[bench]'`) is skipped with a message."""

from __future__ import annotations

import json
import subprocess
import sys
from statistics import median
from typing import Any

from tests.bench.harness import REPO_ROOT
from tests.bench.plan import WINDOW

PEERS = {  # name -> (what the table calls it, durability)
    "langgraph-sqlite": ("LangGraph, SQLite checkpointer", "local file (SQLite)"),
    "langgraph-memory": ("LangGraph, in-memory checkpointer", "process memory"),
    "pydantic-ai": ("Pydantic AI, FunctionModel", "none"),
    "pydantic-ai-dbos": ("Pydantic AI + DBOS, FunctionModel", "DBOS steps (SQLite)"),
    "openai-agents": ("OpenAI Agents SDK, fake model", "none"),
}
TIMEOUT_S = 300


def measure(name: str, calls: int, runs: int) -> dict[str, Any]:
    """One repetition of a peer: W1 and W2 figures, or {"skipped": why}."""
    command = [sys.executable, "-m", "tests.bench.peer_agents", name]
    command += ["--calls", str(calls), "--runs", str(runs)]
    try:
        done = subprocess.run(
            command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return {"skipped": f"did not finish in {TIMEOUT_S}s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"skipped": f"failed (exit {done.returncode}): {done.stderr.strip()[-300:]}"}
    out = json.loads(lines[-1])
    if "skipped" in out:
        return dict(out)
    turns = [t * 1000 for t in out["turn_s"]]
    first, last = median(turns[:WINDOW]), median(turns[-WINDOW:])
    return {
        "ms_per_call": out["long_s"] / calls * 1000,
        "first_turns_ms": first,
        "last_turns_ms": last,
        "growth": last / first,
        "ms_per_run": out["many_s"] / runs * 1000,
    }
