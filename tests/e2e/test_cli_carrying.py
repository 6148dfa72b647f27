"""`agentledger run` as a user runs it carries its run on: each call's claim is
appended with the model reply that proposed it, and each outcome with the next
model request's claim — two appends a tool call, no message between, each claim
still written before its side effect. With `AGENTLEDGER_CARRY_S=0` every step
is an append of its own, as a queued command's. The appends are read back from
the shard's feed (one entry per append, with the seqs it wrote)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from e2ekit import Cli

from agentledger.services.keys import Keys

CALLS = 6
TOOLS = '''
from agentledger import tool


@tool(read_only=True)
def echo(n: int) -> dict:
    """Say the number back."""
    return {"n": n}
'''


def write_spec(folder: Path) -> Path:
    (folder / "carry_tools.py").write_text(TOOLS)
    turns: list[dict[str, Any]] = [
        {"tool_use": [{"id": f"c{i}", "name": "echo", "input": {"n": i}}]}
        for i in range(1, CALLS + 1)
    ]
    spec = {
        "task": f"echo {CALLS} numbers, one a turn",
        "tools": ["carry_tools"],
        "principal": {"id": "e2e", "tenant": "e2e"},
        "budgets": {"max_turns": CALLS + 1},
        "model": {"scripted": [*turns, {"end_turn": "done"}]},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def appends(cli: Cli, run_id: str) -> list[list[dict[str, Any]]]:
    """The run's events, grouped by the append that wrote them."""
    events = {e["seq"]: e for e in cli.events(run_id)}
    keys = Keys(cli.env["AGENTLEDGER_PREFIX"], 16)
    feed: Any = cli.redis().xrange(keys.feed(keys.shard(run_id)))
    rows = [f for _, f in feed if f[b"run"].decode() == run_id]
    groups = [[events[s] for s in range(int(f[b"first"]), int(f[b"seq"]) + 1)] for f in rows]
    assert sum(map(len, groups)) == len(events), "every event is in one append"
    return groups


def append_of(groups: list[list[dict[str, Any]]], type_: str, **data: Any) -> list[str]:
    """The types of the append holding the event of that type whose data match."""
    for group in groups:
        for e in group:
            if e["type"] == type_ and all(e["data"].get(k) == v for k, v in data.items()):
                return [x["type"] for x in group]
    raise AssertionError(f"no {type_} {data} in the log")


def completed(cli: Cli, spec: Path) -> str:
    code, summary = cli.run_json(spec)
    assert code == 0 and summary["status"] == "completed", summary
    run_id: str = summary["run_id"]
    return run_id


def test_each_claim_rides_with_the_step_before_it_two_appends_a_call(
    cli: Cli, tmp_path: Path
) -> None:
    cli.env["AGENTLEDGER_CARRY_S"] = "600"  # a slice no loaded test machine runs out of
    run_id = completed(cli, write_spec(tmp_path))

    groups = appends(cli, run_id)

    for i in range(1, CALLS + 1):
        claim = append_of(groups, "ToolCallStarted", call_id=f"c{i}")
        assert claim[0] == "ModelResponded" and claim[-1] == "ToolCallStarted", claim
        outcome = append_of(groups, "ToolCallSucceeded", call_id=f"c{i}")
        assert outcome == ["ToolCallSucceeded", "ModelRequested"], outcome
        next_claim = append_of(groups, "ModelRequested", turn=i + 1)
        assert next_claim == outcome, "the next model call is claimed with the outcome"
    calls = [g for g in groups if any(e["type"] == "ToolCallStarted" for e in g)]
    assert len(calls) == CALLS
    # created, the first claim, 2 a call, the last reply, then acceptance's own
    assert len(groups) <= 3 + 2 * CALLS + 2, [[e["type"] for e in g] for g in groups]


def test_with_carrying_off_every_step_is_an_append_of_its_own(cli: Cli, tmp_path: Path) -> None:
    cli.env["AGENTLEDGER_CARRY_S"] = "0"
    run_id = completed(cli, write_spec(tmp_path))

    groups = appends(cli, run_id)

    for i in range(1, CALLS + 1):
        assert append_of(groups, "ToolCallSucceeded", call_id=f"c{i}") == ["ToolCallSucceeded"]
        assert append_of(groups, "ModelRequested", turn=i) == ["ModelRequested"]
        claim = append_of(groups, "ToolCallStarted", call_id=f"c{i}")
        assert claim[0] == "ToolCallValidated", claim
