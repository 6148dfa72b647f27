"""examples/flow through the CLI as a user drives it: `agentledger run` goes through
triage, fix (agent stages, each a child run with its own log), verify (one test run)
and stops at the sign-off gate; `resume` approves and `run --attach` merges once;
`abort` denies and the flow ends failed with nothing merged; a fix that never makes
the tests pass goes back from verify to fix at most `max_loops` times. In every
route the parent's spend is the sum of its children's, to the token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2ekit import Cli, copy_example, of_type

COMPLETED, FAILED, AWAITING_HUMAN = 0, 1, 6


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    copy_example("fix_tests", tmp_path)  # the agent stages' file tools
    return copy_example("flow", tmp_path) / "spec.yaml"


def to_the_gate(cli: Cli, spec: Path) -> str:
    code, summary = cli.run_json(spec)
    assert (code, summary["status"]) == (AWAITING_HUMAN, "awaiting_human"), summary
    assert summary["detail"].startswith("Merge fix-add (add adds now)? — evidence: triage")
    return str(summary["run_id"])


def attach(cli: Cli, run_id: str) -> tuple[int, dict[str, Any]]:
    done = cli("run", "--attach", run_id, "--json")
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def children(cli: Cli, run_id: str) -> list[str]:
    return [e["child_run_id"] for e in of_type(cli.events(run_id), "ChildRunStarted")]


def spend_adds_up(cli: Cli, run_id: str) -> None:
    """The parent's recorded spend of each child is what the child's own log says."""
    kids = children(cli, run_id)
    ended = {e["child_run_id"]: e for e in of_type(cli.events(run_id), "ChildRunEnded")}
    assert set(ended) == set(kids)
    for kid in kids:
        replies = of_type(cli.events(kid), "ModelResponded")
        for side in ("input_tokens", "output_tokens"):
            assert ended[kid]["usage"][side] == sum(r["usage"][side] for r in replies), kid
        created = cli.events(kid)[0]
        assert created["type"] == "RunCreated" and created["data"]["parent_run_id"] == run_id


def test_an_approved_flow_completes_and_merges_once(cli: Cli, flow: Path) -> None:
    run_id = to_the_gate(cli, flow)
    assert cli("resume", run_id).returncode == 0
    code, summary = attach(cli, run_id)

    assert (code, summary["status"]) == (COMPLETED, "completed"), summary
    stages = [k.split(".")[1] for k in children(cli, run_id)]
    assert stages == ["triage", "fix", "verify", "merge"]
    merged = (cli.workspace(run_id) / "merged.log").read_text().splitlines()
    assert [json.loads(m)["branch"] for m in merged] == ["fix-add"]
    spend_adds_up(cli, run_id)
    fix = children(cli, run_id)[1]  # a child is a run: replay and context work on it
    assert cli("replay", fix).returncode == 0
    context = cli("context", fix, "--turn", "2")
    assert context.returncode == 0 and "verified" in context.stdout, context.stderr


def test_a_denied_gate_ends_the_flow_failed_with_nothing_merged(cli: Cli, flow: Path) -> None:
    run_id = to_the_gate(cli, flow)
    assert cli("abort", run_id).returncode == 0
    code, summary = attach(cli, run_id)

    assert (code, summary["status"]) == (FAILED, "failed"), summary
    assert "stage 'signoff' denied" in str(summary), summary
    assert "merge" not in [k.split(".")[1] for k in children(cli, run_id)]
    assert not (cli.workspace(run_id) / "merged.log").exists()
    spend_adds_up(cli, run_id)


def test_verify_failing_goes_back_to_fix_at_most_max_loops_times(cli: Cli, flow: Path) -> None:
    spec = yaml.safe_load(flow.read_text())
    fix = spec["flow"][1]["agent"]["model"]["scripted"][0]["tool_use"][0]["input"]
    fix["content"] = fix["content"].replace("return a + b", "return a - b + 0")  # still wrong
    spec["max_loops"] = 1
    flow.write_text(yaml.safe_dump(spec))
    code, summary = cli.run_json(flow)

    assert (code, summary["status"]) == (FAILED, "failed"), summary
    assert "max_loops (1)" in summary["detail"]
    stages = [k.split(".")[1] for k in children(cli, summary["run_id"])]
    assert stages == ["triage", "fix", "verify", "fix", "verify"]
    routes = of_type(cli.events(summary["run_id"]), "FlowRouted")
    assert [(r["stage"], r["outcome"], r["to"]) for r in routes[-2:]] == [
        ("fix", "completed", "verify"),
        ("verify", "failed", None),
    ]
    spend_adds_up(cli, summary["run_id"])
