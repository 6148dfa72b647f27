"""A flow cancelled through the CLI while its stage's child run is in a tool call: the
child is cancelled as any run is (the call's stop asked for, then forced after the
grace period, both times recorded), then the flow's run ends cancelled, its child's
end and spend recorded first."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers, types

GRACE_S = 1.0


@pytest.fixture
def steering(tmp_path: Path) -> Path:
    return copy_example("steering", tmp_path)


@pytest.fixture
def workers(cli: Cli, steering: Path) -> Iterator[subprocess.Popen[str]]:
    proc = start_workers(cli, tools=["steer_tools"], tool_path=steering)
    yield proc
    stop_workers([proc])


def flow_spec(steering: Path) -> Path:
    sleep = {"id": "z1", "name": "stubborn_sleep", "input": {"seconds": 30}}
    spec = {
        "task": "sleep, then note it", "tools": ["steer_tools"], "workspace": "./ws",
        "principal": {"id": "alice", "tenant": "t1"},
        "policies": {"cancel_grace_s": GRACE_S},
        "flow": [
            {"id": "sleep", "agent": {"task": "{input.task}", "model": {"scripted": [
                {"tool_use": [sleep]}, {"end_turn": "slept"}]}}},
            {"id": "note", "call": {"tool": "read_file", "input": {"path": "README.txt"}}},
        ],
    }  # fmt: skip
    path = steering / "flow_cancel.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_cancelled_flow_cancels_its_child_in_a_tool_call_with_both_times(
    cli: Cli, steering: Path, workers: subprocess.Popen[str]
) -> None:
    done = cli("submit", "--as", cli.publisher(), flow_spec(steering))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    child = f"{run_id[: run_id.rindex('.s')]}.sleep.1{run_id[run_id.rindex('.s') :]}"
    cli.wait_events(child, lambda events: "ToolCallStarted" in types(events), 30)
    time.sleep(0.3)  # the subprocess starts and sets its trap
    assert cli("cancel", "--as", cli.publisher(), run_id).returncode == 0
    events = cli.wait_events(run_id, lambda events: "RunCancelled" in types(events), 30)

    assert types(events)[-3:] == ["RunCancelRequested", "ChildRunEnded", "RunCancelled"]
    [asked] = [e for e in events if e["type"] == "RunCancelRequested"]
    kid = cli.events(child)
    [killed] = of_type(kid, "ToolCallForceTerminated")
    [child_asked] = [e for e in kid if e["type"] == "RunCancelRequested"]
    [child_done] = [e for e in kid if e["type"] == "RunCancelled"]
    assert child_asked["data"]["by"] == f"flow {run_id}"
    assert killed["requested_at"] == child_asked["at"]  # both times recorded
    assert killed["terminated_at"] - killed["requested_at"] >= GRACE_S
    assert asked["at"] <= child_asked["at"] <= child_done["at"]
    print(
        f"\nthe child ended cancelled {child_done['at'] - asked['at']:.2f}s after the flow's "
        f"cancel (grace {GRACE_S:g}s)"
    )
    [ended] = of_type(events, "ChildRunEnded")
    assert ended["status"] == "cancelled" and ended["usage"]["input_tokens"] > 0
