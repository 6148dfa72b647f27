"""Two workers whose tool sets differ only in a helper module their tools
import: `agentledger toolset` gives them two fingerprints, the workers say
those same fingerprints, and a run bound to one is never taken by the other —
it waits, saying so, until a worker with its own code comes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2ekit import Cli, start_workers, stop_workers

TOOLS = '''"""The same tool in both folders; only the helper differs."""

import helper

from agentledger import ToolContext, tool


@tool(read_only=True)
def who(ctx: ToolContext) -> dict:
    """Say whose helper this is."""
    return {"who": helper.WHO}
'''
SPEC = """task: "Say whose helper runs"
tools: [tools]
principal: {id: alice, tenant: t1}
budgets: {max_turns: 3}
model:
  scripted:
    - tool_use: [{id: w1, name: who, input: {}}]
    - end_turn: "said"
"""


def folder(base: Path, who: str) -> Path:
    made = base / who
    made.mkdir()
    (made / "tools.py").write_text(TOOLS)
    (made / "helper.py").write_text(f"WHO = {who!r}\n")
    (made / "spec.yaml").write_text(SPEC)
    return made


def status(cli: Cli, run_id: str) -> dict[str, Any]:
    done = cli("status", "--json", run_id)
    return json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}


def until(check: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.5)


def test_a_run_bound_to_one_helper_is_never_taken_by_a_worker_with_another(
    cli: Cli, tmp_path: Path
) -> None:
    a, b = folder(tmp_path, "a"), folder(tmp_path, "b")
    fingerprints = {
        f.name: cli("toolset", "--tools", "tools", "--tool-path", f).stdout.strip() for f in (a, b)
    }
    assert fingerprints["a"] != fingerprints["b"]
    publisher = cli.publisher()
    other = start_workers(cli, tools=["tools"], tool_path=b)
    mine = None
    try:
        submitted = cli("submit", "--as", publisher, "--unserved", "--json", a / "spec.yaml")
        assert submitted.returncode == 0, submitted.stderr
        said = json.loads(submitted.stdout)
        run_id = said["run_id"]
        assert said["toolset"] == fingerprints["a"]
        until(lambda: "waiting_for" in status(cli, run_id))
        waiting = status(cli, run_id)
        assert (
            waiting["waiting_for"]
            == f"no worker serves queue 'default' with tool set {fingerprints['a']}"
        )
        assert [e["type"] for e in cli.events(run_id)] == ["RunCreated"]  # b's worker took nothing

        mine = start_workers(cli, tools=["tools"], tool_path=a)
        until(lambda: status(cli, run_id).get("status") == "completed")
        outputs = [
            e["data"].get("output") for e in cli.events(run_id) if e["type"] == "ToolCallSucceeded"
        ]
        assert outputs == [{"who": "a"}]
    finally:
        stop_workers([w for w in (other, mine) if w is not None])
