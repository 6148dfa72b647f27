"""A flow's gate answered through the CLI by the commands the issue names: `approve
RUN` (no call at a gate), `deny RUN --reason …`, `reply RUN TEXT` (routed by the
gate's `on: {replied: …}`, its text data in later templates); `status` shows the
question and the evidence while it waits. The trust rules of every control: another
tenant's publisher and a read-only view are refused, nothing recorded. And an agent
stage routed on its child's wait for a person (`on: {awaiting_human: …}`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from e2ekit import Cli, copy_example, of_type, types
from test_cli_flow import AWAITING_HUMAN, COMPLETED, FAILED, attach, children, spend_adds_up
from webkit import post, start_ui

USAGE = 2


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    copy_example("fix_tests", tmp_path)
    return copy_example("flow", tmp_path) / "spec.yaml"


def at_the_gate(cli: Cli, spec: Path) -> str:
    code, summary = cli.run_json(spec)
    assert (code, summary["status"]) == (AWAITING_HUMAN, "awaiting_human"), summary
    assert summary["next"][0] == f"agentledger approve {summary['run_id']}"
    return str(summary["run_id"])


def test_approve_at_a_gate_names_no_call_and_status_shows_the_question_and_evidence(
    cli: Cli, flow: Path
) -> None:
    run_id = at_the_gate(cli, flow)
    status = cli("status", run_id)
    assert status.returncode == AWAITING_HUMAN, status.stderr
    lines = status.stdout.splitlines()
    assert "  gate 'signoff' asks (approve or deny): Merge fix-add (add adds now)?" in lines
    evidence = [x.strip() for x in lines if x.strip().startswith("evidence: ")]
    assert [e.split()[1:3] for e in evidence] == [
        ["triage", "completed:"], ["fix", "completed:"], ["verify", "succeeded:"]]  # fmt: skip
    as_json = json.loads(cli("status", run_id, "--json").stdout)["flow"]["gate"]
    assert as_json["question"] == "Merge fix-add (add adds now)?"
    assert as_json["evidence"][1]["result"]["branch"] == "fix-add"

    wrong = cli("approve", run_id, "c1")  # a call id at a gate: refused, naming the gate
    assert wrong.returncode == USAGE
    assert f"run {run_id!r} waits at its flow's gate 'signoff', not on a call" in wrong.stderr
    assert cli("approve", run_id).returncode == 0
    code, summary = attach(cli, run_id)
    assert (code, summary["status"]) == (COMPLETED, "completed"), summary
    merged = (cli.workspace(run_id) / "merged.log").read_text().splitlines()
    assert [json.loads(m)["branch"] for m in merged] == ["fix-add"]
    spend_adds_up(cli, run_id)


def test_deny_at_a_gate_with_a_reason_ends_the_flow_failed_saying_it(cli: Cli, flow: Path) -> None:
    run_id = at_the_gate(cli, flow)
    reply = cli("reply", run_id, "maybe")  # this gate routes no reply
    assert reply.returncode == USAGE and "gate 'signoff' takes no reply" in reply.stderr
    assert cli("deny", run_id, "--reason", "not before the release").returncode == 0
    code, summary = attach(cli, run_id)
    assert (code, summary["status"]) == (FAILED, "failed"), summary
    assert "stage 'signoff' denied: not before the release" in str(summary), summary
    assert not (cli.workspace(run_id) / "merged.log").exists()


def test_a_reply_at_a_gate_is_routed_by_replied_and_is_data_in_later_templates(
    cli: Cli, flow: Path
) -> None:
    spec = yaml.safe_load(flow.read_text())
    gate = spec["flow"][3]
    gate["on"] = {**gate.pop(True), "replied": "note"}  # YAML 1.1 reads a bare on: as true
    spec["flow"].append({"id": "note", "call": {"tool": "write_file", "input": {
        "path": "note.txt", "content": "{signoff.result.by} said: {signoff.result.reply}"}}})  # fmt: skip
    flow.write_text(yaml.safe_dump(spec))
    run_id = at_the_gate(cli, flow)
    assert "approve, deny or reply" in cli("status", run_id).stdout
    said = cli("reply", run_id, "--by", "pat", "wait for {input.task}")
    assert said.returncode == 0, said.stderr
    assert "HumanReplied" in said.stdout, said.stdout
    code, summary = attach(cli, run_id)
    routes = of_type(cli.events(run_id), "FlowRouted")
    assert ("signoff", "replied", "note") in [(r["stage"], r["outcome"], r["to"]) for r in routes]

    assert (code, summary["status"]) == (COMPLETED, "completed"), summary
    note = (cli.workspace(run_id) / "note.txt").read_text()
    assert note == "pat said: wait for {input.task}"  # the reply as written, never filled in
    assert "merge" not in [k.split(".")[1] for k in children(cli, run_id)]


def test_another_tenants_publisher_and_a_read_only_view_cannot_answer_the_gate(
    cli: Cli, flow: Path
) -> None:
    run_id = at_the_gate(cli, flow)
    added = cli("publishers", "add", "mallory", "--principal", "*@other", "--scopes", "*",
                "--queues", "*", "--workspaces", str(cli.cwd))  # fmt: skip
    assert added.returncode == 0 or "already" in added.stderr, added.stderr
    before = len(cli.events(run_id))
    for answer in (["approve", run_id], ["deny", run_id], ["reply", run_id, "merge it"]):
        done = cli(*answer, "--as", "mallory")
        assert done.returncode == USAGE, (answer, done.stdout, done.stderr)
        assert "'mallory' may not control runs of principal bob@dev-1" in done.stderr
    view, url = start_ui(cli)  # no --as: read-only
    try:
        code, body = post(f"{url}api/runs/{run_id}/control", {"action": "approve"})
        assert (code, body["error"]) == (403, "read-only")
    finally:
        view.terminate()
        view.wait(timeout=15)
    assert len(cli.events(run_id)) == before  # nothing recorded
    assert json.loads(cli("status", run_id, "--json").stdout)["status"] == "awaiting_human"


def test_an_agent_stage_routed_on_its_childs_wait_goes_to_the_gate_and_cancels_the_child(
    cli: Cli, flow: Path
) -> None:
    spec = yaml.safe_load(flow.read_text())
    fix = spec["flow"][1]
    fix["agent"]["model"]["scripted"] = [{"refusal": "I may not touch calc.py"}]
    fix["on"] = {**fix.pop(True), "awaiting_human": "ask"}  # YAML 1.1 reads on: as true
    spec["flow"].insert(2, {"id": "ask", "human": {"question": "fix asks: {fix.result.summary}"},
                            "on": {"approved": "fix", "denied": "stop"}})  # fmt: skip
    flow.write_text(yaml.safe_dump(spec))
    code, summary = cli.run_json(flow)

    assert (code, summary["status"]) == (AWAITING_HUMAN, "awaiting_human"), summary
    assert summary["detail"].startswith("fix asks: the model refused at turn 1")
    run_id = summary["run_id"]
    kid = children(cli, run_id)[1]
    [ended] = [e for e in of_type(cli.events(run_id), "ChildRunEnded") if e["stage"] == "fix"]
    assert (ended["outcome"], ended["result"]["run"]) == ("awaiting_human", kid)
    kid_events = cli.events(kid)
    assert types(kid_events)[-1] == "RunCancelled"  # its end recorded in its own log
    [asked] = of_type(kid_events, "RunCancelRequested")
    assert asked["by"] == f"flow {run_id}"
    spend_adds_up(cli, run_id)
    assert cli("deny", run_id).returncode == 0
    code, summary = attach(cli, run_id)
    assert (code, summary["status"]) == (FAILED, "failed"), summary
