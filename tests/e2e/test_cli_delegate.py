"""The built-in `delegate` tool through the CLI: a model proposing two delegate calls in
one turn runs two child runs at once (each linked to its parent, on the parent's
principal), each call's result is its child's outcome, and the parent's spend is its
own plus its children's, to the token. A model steered to ask for more — other tools,
bigger budgets, another principal, more children at once, a deeper tree — is refused
each time with a clear error, and nothing is started."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from e2ekit import Cli, copy_example, of_type

CHILD = {"scripted": [{"end_turn": "child done"}]}


def spec_file(tmp: Path, calls: list[dict[str, Any]], **delegate: Any) -> Path:
    ws = copy_example("fix_tests", tmp)
    spec = {
        "task": "split the work", "tools": ["fix_tools"], "workspace": "./ws",
        "principal": {"id": "alice", "tenant": "t1"},
        "budgets": {"max_turns": 10, "max_output_tokens": 5000},
        "delegate": {"max_at_once": 2, "model": CHILD, **delegate},
        "model": {"scripted": [{"tool_use": calls}, {"end_turn": "all done"}]},
    }  # fmt: skip
    path = ws / "delegate.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def call(cid: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "name": "delegate", "input": {"task": f"part {cid}", **args}}


def test_two_children_at_once_and_the_spend_adds_up(cli: Cli, tmp_path: Path) -> None:
    spec = spec_file(
        tmp_path, [call("a", tools=["fix_tools"]), call("b", budgets={"max_turns": 2})]
    )
    code, summary = cli.run_json(spec)
    assert (code, summary["status"]) == (0, "completed"), summary
    run_id = summary["run_id"]
    events = cli.events(run_id)
    outs = {e["call_id"]: e["output"] for e in of_type(events, "ToolCallSucceeded")}
    assert {o["status"] for o in outs.values()} == {"completed"}
    assert {o["result"] for o in outs.values()} == {"child done"}
    kids = [o["run_id"] for o in outs.values()]
    assert len(set(kids)) == 2
    starts = [cli.events(k)[0] for k in kids]
    for created in starts:
        data = created["data"]
        assert data["parent_run_id"] == run_id and data["spec"]["principal"]["id"] == "alice"
        assert data["spec"]["delegate"] is None  # max_depth 1: a child cannot delegate
    ended = of_type(events, "ChildRunEnded")
    assert sorted(e["child_run_id"] for e in ended) == sorted(kids)
    own = of_type(events, "ModelResponded")
    for side in ("input_tokens", "output_tokens"):
        children = sum(
            r["usage"][side] for k in kids for r in of_type(cli.events(k), "ModelResponded")
        )
        mine = sum(r["usage"][side] for r in own)
        assert sum(e["usage"][side] for e in ended) == children  # to the token
        shown = cli("status", run_id, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["usage"][side] == mine + children
    tree = json.loads(cli("status", run_id, "--json").stdout)["children"]
    nodes = {n["run_id"]: n for n in tree["children"]}
    assert set(nodes) == set(kids)  # the tree with spend per node
    for kid in kids:
        replies = of_type(cli.events(kid), "ModelResponded")
        assert nodes[kid]["output_tokens"] == sum(r["usage"]["output_tokens"] for r in replies)
    shown = cli("status", run_id).stdout
    assert "tree (own and children's spend)" in shown and all(k in shown for k in kids)
    print(f"\nparent {run_id}: children {kids}\n{shown}")


def test_a_steered_model_asking_for_more_is_refused_and_nothing_starts(
    cli: Cli, tmp_path: Path
) -> None:
    """Injected text steers the model: other tools, bigger budgets, another tenant's
    principal, a third child at once, a grandchild. Each is refused, told why."""
    deeper = {"scripted": [{"tool_use": [call("g")]}, {"end_turn": "tried"}]}
    calls = [
        call("t", tools=["steer_tools"]), call("b", budgets={"max_turns": 999}),
        call("p", principal={"id": "mallory", "tenant": "t2", "scopes": ["admin"]}),
        call("ok1"), call("ok2"), call("many"),
    ]  # fmt: skip
    code, summary = cli.run_json(spec_file(tmp_path, calls, model=deeper))
    assert summary["status"] == "completed", summary
    events = cli.events(summary["run_id"])
    rejected = {e["call_id"]: str(e) for e in of_type(events, "ToolCallRejected")}
    assert set(rejected) == {"t", "b", "p", "many"}, rejected
    assert "'steer_tools' is not one this run may give a child" in rejected["t"]
    assert "budgets.max_turns 999 is more than this run has left" in rejected["b"]
    assert "not principal" in rejected["p"] and "principal, tenant and scopes" in rejected["p"]
    assert "max_at_once 2" in rejected["many"]
    ended = of_type(events, "ChildRunEnded")
    assert len(ended) == 2  # nothing started for a refused call
    for kid in (e["child_run_id"] for e in ended):
        [grandchild] = of_type(cli.events(kid), "ToolCallRejected")
        assert "may not start child runs" in str(grandchild)  # max_depth 1
        assert cli.events(kid)[0]["data"]["spec"]["principal"]["tenant"] == "t1"
