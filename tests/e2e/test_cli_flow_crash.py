"""examples/flow on `agentledger workers` processes, the worker SIGKILLed once in each
stage (holding the first call of triage, fix and verify, at the gate, as merge starts)
and started again: the flow completes, each stage's child run was
made once, and every side effect happened once (fix's write, the merge)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2ekit import AGENTLEDGER, Cli, by_call, copy_example, of_type, start_intake, types

STAGE_TIMEOUT_S = 90.0
Events = list[dict[str, Any]]


HOLDS = """
import time
from pathlib import Path

from agentledger import ToolContext, ToolFailure, tool
from flow_tools import merge_branch, merge_lookup, verify_tests


def _wait(name: str, ctx: ToolContext) -> None:
    for _ in range(1200):  # a minute at most
        if (Path(ctx.workspace) / name).exists():
            return
        time.sleep(0.05)
    raise ToolFailure("timeout", f"{name} never came")


@tool(read_only=True, timeout_s=120)
def hold(name: str, ctx: ToolContext) -> dict:
    \"\"\"Waits until the workspace has a file `name`.\"\"\"
    _wait(name, ctx)
    return {"held": name}


@tool(read_only=True, timeout_s=120)
def hold_then_verify(name: str, ctx: ToolContext) -> dict:
    \"\"\"Waits until the workspace has a file `name`, then runs the tests.\"\"\"
    _wait(name, ctx)
    return verify_tests(ctx)


@tool(writes=lambda a, ws: [f"file:{ws}/merged.log"], scope="repo:merge", timeout_s=10,
      lookup=merge_lookup)
def hold_then_merge(name: str, branch: str, ctx: ToolContext) -> dict:
    \"\"\"Waits until the workspace has a file `name`, then merges.\"\"\"
    _wait(name, ctx)
    return merge_branch(branch, ctx)
"""


@pytest.fixture
def flow(tmp_path: Path) -> Path:
    """examples/flow with a hold at the start of each stage: its worker is killed while
    it holds (the test lets it go on once the next worker is starting)."""
    copy_example("fix_tests", tmp_path)
    spec_path = copy_example("flow", tmp_path) / "spec.yaml"
    (spec_path.parent / "holds.py").write_text(HOLDS)
    spec = yaml.safe_load(spec_path.read_text())
    spec["tools"].append("holds")
    for stage in spec["flow"][:2]:
        agent = stage["agent"]
        agent["tools"].append("holds")
        hold = {"id": f"h-{stage['id']}", "name": "hold", "input": {"name": f"go-{stage['id']}"}}
        agent["model"]["scripted"].insert(0, {"tool_use": [hold]})
    spec["flow"][2]["call"] = {"tool": "hold_then_verify", "input": {"name": "go-verify"}}
    spec["flow"][4]["call"] = {
        "tool": "hold_then_merge",
        "input": {"name": "go-merge", "branch": "{fix.result.branch}"},
    }
    spec_path.write_text(yaml.safe_dump(spec))
    return spec_path


@pytest.fixture
def procs(cli: Cli) -> Iterator[list[subprocess.Popen[str]]]:
    cli.env["AGENTLEDGER_MODEL_LEASE_S"] = (
        "3"  # a killed worker's model claim is not waited on long
    )
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def workers(cli: Cli, flow: Path, procs: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    args = [
        *AGENTLEDGER, "workers", "--tools", "fix_tools", "flow_tools", "holds",
        "--tool-path", str(flow.parent.parent / "fix_tests"), "--tool-path", str(flow.parent),
    ]  # fmt: skip
    log = (cli.cwd / "workers.log").open("a")
    proc = subprocess.Popen(args, cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE,
                            stderr=log)  # fmt: skip
    procs.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "workers up" in line, f"the workers did not start: {line!r}"
    return proc


def kill_when(
    cli: Cli, run_id: str, seen: Callable[[Events], bool], proc: subprocess.Popen[str]
) -> None:
    cli.wait_events(run_id, seen, STAGE_TIMEOUT_S)
    proc.kill()  # SIGKILL
    proc.wait()


def killed_in(cli: Cli, run_id: str, stage: str) -> None:
    """With no worker up the flow cannot have moved on: where it stands is where the
    worker died."""
    done = cli("status", run_id, "--json")
    flow = json.loads(done.stdout)["flow"]
    assert (flow["stage"], flow["phase"]) == (
        stage,
        "at_gate" if stage == "signoff" else "in_child",
    )
    print(f"\nkilled in {stage}: {[(n['stage'], n['status']) for n in flow['children']][-1:]}")


def has(kind: str, **fields: Any) -> Callable[[Events], bool]:
    def found(events: Events) -> bool:
        return any(
            e.get("type") == kind and all(e["data"].get(k) == v for k, v in fields.items())
            for e in events
        )

    return found


def test_a_worker_killed_in_each_stage_leaves_the_flow_complete_with_every_effect_once(
    cli: Cli, flow: Path, procs: list[subprocess.Popen[str]]
) -> None:
    procs.append(start_intake(cli))
    proc = workers(cli, flow, procs)
    done = cli("submit", "--as", cli.publisher(), flow)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    child = {s: f"{run_id[: run_id.rindex('.s')]}.{s}.1{run_id[run_id.rindex('.s'):]}"
             for s in ("triage", "fix", "verify", "merge")}  # fmt: skip

    for stage in ("triage", "fix", "verify"):  # killed holding the stage's call
        kill_when(cli, child[stage], has("ToolCallStarted"), proc)
        killed_in(cli, run_id, stage)
        (cli.workspace(run_id) / f"go-{stage}").touch()
        proc = workers(cli, flow, procs)
    kill_when(cli, run_id, has("RunEscalated", reason="flow_gate"), proc)
    killed_in(cli, run_id, "signoff")
    resumed = cli("resume", run_id, "--as", cli.publisher())  # the intake takes it; no worker is up
    assert resumed.returncode == 0, resumed.stderr
    proc = workers(cli, flow, procs)
    kill_when(cli, child["merge"], has("ToolCallStarted"), proc)  # holding the merge (a write)
    killed_in(cli, run_id, "merge")
    (cli.workspace(run_id) / "go-merge").touch()
    workers(cli, flow, procs)
    events = cli.wait_events(run_id, has("RunCompleted"), STAGE_TIMEOUT_S)

    for stage in ("triage", "fix", "verify"):  # the held call, claimed again by the next worker
        claims = [
            e["data"]["attempt"] for e in cli.events(child[stage]) if e["type"] == "ToolCallStarted"
        ]
        assert claims[:2] == [1, 2], (stage, claims)
    started = of_type(events, "ChildRunStarted")
    assert [s["stage"] for s in started] == ["triage", "fix", "verify", "merge"]
    fix_events = cli.events(child["fix"])
    assert by_call(fix_events, "w1").count("ToolCallStarted") == 1  # the write ran once
    assert by_call(fix_events, "w1")[-1] == "ToolCallSucceeded"
    print(f"\nmerge call: {by_call(cli.events(child['merge']), 'merge-1')}")
    merged = (cli.workspace(run_id) / "merged.log").read_text().splitlines()
    assert [json.loads(m)["branch"] for m in merged] == ["fix-add"]
    assert types(events)[-1] == "RunCompleted"
