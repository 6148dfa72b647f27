"""Issue 38's target through the CLI: a parent cancelled while two of its `delegate`
children run tools. Both children end `cancelled`, each with both times recorded (the
stop asked for, then forced after the grace period), and the parent ends `cancelled`
with each call's end and each child's spend recorded. The measured durations are
printed, not asserted (a loaded machine's timing is not the code's)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers, types

from agentledger.events.delegate import delegate_child_id

GRACE_S = 1.0


@pytest.fixture
def steering(tmp_path: Path) -> Path:
    return copy_example("steering", tmp_path)


@pytest.fixture
def workers(cli: Cli, steering: Path) -> Iterator[subprocess.Popen[str]]:
    proc = start_workers(cli, tools=["steer_tools"], tool_path=steering)
    yield proc
    stop_workers([proc])


def parent_spec(steering: Path) -> Path:
    sleep = {"id": "z1", "name": "stubborn_sleep", "input": {"seconds": 30}}
    calls = [{"id": c, "name": "delegate", "input": {"task": f"sleep {c}"}} for c in ("a", "b")]
    spec = {
        "task": "two sleepers", "tools": ["steer_tools"], "workspace": "./ws",
        "principal": {"id": "alice", "tenant": "t1"},
        "policies": {"cancel_grace_s": GRACE_S},
        "delegate": {"model": {"scripted": [{"tool_use": [sleep]}, {"end_turn": "slept"}]}},
        "model": {"scripted": [{"tool_use": calls}, {"end_turn": "done"}]},
    }  # fmt: skip
    path = steering / "delegate_cancel.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_cancelled_parent_cancels_both_children_in_tool_calls_with_both_times(
    cli: Cli, steering: Path, workers: subprocess.Popen[str]
) -> None:
    done = cli("submit", "--as", cli.publisher(), parent_spec(steering))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    cli.wait_events(run_id, lambda ev: len(of_type(ev, "ToolCallStarted")) == 2, 30)
    kids = [delegate_child_id(run_id, c) for c in ("a", "b")]
    for kid in kids:
        cli.wait_events(kid, lambda ev: "ToolCallStarted" in types(ev), 30)
    time.sleep(0.3)  # the subprocesses start and set their traps
    assert cli("cancel", "--as", cli.publisher(), run_id).returncode == 0
    events = cli.wait_events(run_id, lambda ev: "RunCancelled" in types(ev), 30)

    [asked] = [e for e in events if e["type"] == "RunCancelRequested"]
    ended = {e["child_run_id"]: e for e in of_type(events, "ChildRunEnded")}
    assert set(ended) == set(kids)
    assert {e["status"] for e in ended.values()} == {"cancelled"}
    assert len(of_type(events, "ToolCallCancelled")) == 2  # each delegate call, once
    for kid in kids:
        log = cli.events(kid)
        [killed] = of_type(log, "ToolCallForceTerminated")
        [child_asked] = [e for e in log if e["type"] == "RunCancelRequested"]
        [child_done] = [e for e in log if e["type"] == "RunCancelled"]
        assert child_asked["data"]["by"] == f"parent {run_id}"
        assert killed["requested_at"] == child_asked["at"]  # both times recorded
        assert killed["terminated_at"] - killed["requested_at"] >= GRACE_S
        assert asked["at"] <= child_asked["at"] <= child_done["at"]
        print(
            f"\nchild {kid}: cancelled {child_done['at'] - asked['at']:.2f}s after the "
            f"parent's cancel (grace {GRACE_S:g}s; bound grace + 1 s)"
        )
