"""Fair carrying on a real Redis: a thread that carries a run hands its turn on
when another waits. While run A's tool call is in progress on one thread, run B's
delivery sees a message waiting for its pool and another thread carrying: it
parks B (its tool call already claimed, in the log) and leaves. B is not lost
behind it: the threads still carrying take it in turn, round-robin, so A's calls
no longer run back to back while others wait, and every run ends with each call
done once. Steps go from run to run with no message and no append of their own."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import redis
from itkit import create_run

from agentledger.events.commands import Pool
from agentledger.events.status import RunStatus
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.broker.budgets import CURRENT, Budgets
from agentledger.services.adapters.tools.toolset import load_toolset
from agentledger.services.bootstrap import build_app
from agentledger.services.handlers.app import App, Carrying
from agentledger.services.handlers.carry import handle_request_model
from agentledger.services.handlers.turns import Turns
from agentledger.services.settings import Settings

CALLS = 6
MODULE = "fair_tools"
TOOLS = '''
import time
from pathlib import Path

from agentledger import tool


@tool(read_only=True)
def gated(n: int, gate: str = "") -> dict:
    """Say the number back; with a gate, once the gate file exists (at most 30 s)."""
    if gate:
        Path(gate + ".reached").touch()
        deadline = time.monotonic() + 30
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return {"n": n}
'''


def spec(tools_dir: Path, gate: str = "") -> RunSpec:
    turns: list[dict[str, Any]] = [
        {"tool_use": [{"id": f"c{i}", "name": "gated",
                       "input": {"n": i, "gate": gate if i == 1 else ""}}]}
        for i in range(1, CALLS + 1)
    ]  # fmt: skip
    return RunSpec.model_validate({
        "task": "echo numbers, one a turn",
        "tools": [MODULE],
        "tool_path": [str(tools_dir)],
        "principal": {"id": "it", "tenant": "it-tenant"},
        "budgets": {"max_turns": CALLS + 1},
        "model": {"scripted": [*turns, {"end_turn": "done"}]},
    })  # fmt: skip


def deliver(app: App, budgets: Budgets, run_id: str) -> threading.Thread:
    """A worker thread's delivery of the run's first model request, with a slot."""

    def body() -> None:
        slot = budgets.take(str(Pool.MODEL))
        assert slot is not None
        CURRENT.set(slot)
        try:
            handle_request_model(app, run_id)
        finally:
            slot.release()

    thread = threading.Thread(target=body, name=f"delivery-{run_id}")
    thread.start()
    return thread


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def test_a_run_that_waits_gets_turns_while_another_is_carried(
    settings: Settings, client: redis.Redis, tmp_path: Path
) -> None:
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    (tools_dir / f"{MODULE}.py").write_text(TOOLS)
    toolset = load_toolset([MODULE], [str(tools_dir)])
    budgets = Budgets({"model": 4, "tools": 4, "accept": 4})  # a move never fails here
    turns: Turns[Any] = Turns(shared_s=0.0, messages=budgets.waiting)
    app = build_app(settings, client, toolset)
    app = App(**{**app.__dict__, "carrying": Carrying("it", frozenset(Pool), 60.0, turns=turns)})
    gate = tmp_path / "gate"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    a, b, c = (
        create_run(app, client, name, spec(tools_dir, str(gate) if name == "run-a" else ""), workspace)
        for name in ("run-a", "run-b", "run-c")
    )  # fmt: skip

    budgets.wait("model", 1)  # a message waits for each pool (the consumer says so)
    budgets.wait("tools", 1)
    first = deliver(app, budgets, a)
    wait_for(Path(f"{gate}.reached"))  # A's first call runs on its thread: it carries
    deliver(app, budgets, b).join(timeout=60)
    # B's delivery took its first call, then handed its turn on: B is in hand, not done
    assert turns.in_hand() == 1
    assert app.runs.load(b).status is RunStatus.REQUESTING_MODEL  # type: ignore[union-attr]

    budgets.wait("model", 0)
    budgets.wait("tools", 0)
    gate.touch()
    third = deliver(app, budgets, c)
    for thread in (first, third):
        thread.join(timeout=120)
        assert not thread.is_alive()

    assert turns.in_hand() == 0 and turns.carriers() == 0
    successes: list[tuple[float, str]] = []
    for run_id in (a, b, c):
        log = app.store.read(run_id)
        assert log[-1].type == "RunCompleted", f"{run_id} ended {log[-1].type}"
        done = [e for e in log if e.type == "ToolCallSucceeded"]
        assert len({e.data.call_id for e in done}) == len(done) == CALLS  # each call once
        successes += [(e.at, run_id) for e in done]
    order = [run_id for _, run_id in sorted(successes)]
    first_a, last_a = order.index(a), len(order) - 1 - order[::-1].index(a)
    assert set(order[first_a:last_a]) - {a}, f"A's calls ran back to back: {order}"
