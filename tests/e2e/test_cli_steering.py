"""Every way a run can end, through the CLI with its exit code, and the controls
people use on a live run: cancel, approve, deny, reply, resume, abort."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers, types


@pytest.fixture
def steering(tmp_path: Path) -> Path:
    return copy_example("steering", tmp_path)


@pytest.fixture
def workers(cli: Cli, steering: Path) -> Iterator[subprocess.Popen[str]]:
    """Worker pools for the steering tools in a process of their own, as an operator
    would run them; up (its tool set registered) before the test goes on."""
    proc = start_workers(cli, tools=["steer_tools"], tool_path=steering)
    yield proc
    stop_workers([proc])


def submit(cli: Cli, spec: Path) -> str:
    done = cli("submit", "--as", cli.publisher(), spec)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def wait_for(cli: Cli, run_id: str, event_type: str, timeout_s: float = 20) -> list[dict]:
    return cli.wait_events(run_id, lambda events: event_type in types(events), timeout_s)


def status(cli: Cli, run_id: str) -> tuple[int, dict]:
    done = cli("status", run_id, "--json")
    return done.returncode, json.loads(done.stdout)


def test_the_repeat_exercise_leaves_the_loop_at_the_threshold_and_waits_for_a_human(cli, steering):
    code, summary = cli.run_json(steering / "repeat.yaml")
    assert (code, summary["status"]) == (6, "awaiting_human")
    assert summary["detail"] == "3 turns, 3 identical `not_found` for read_file(path='notes.txt')"
    events = cli.events(summary["run_id"])
    failures = of_type(events, "ToolCallFailed")
    assert [f["error"]["code"] for f in failures] == ["not_found"] * 3
    # each failure went back to the model before it asked again
    assert [r["turn"] for r in of_type(events, "ModelResponded")] == [1, 2, 3]


def test_a_run_out_of_turns_ends_budget_exhausted_with_exit_3(cli, steering):
    code, summary = cli.run_json(steering / "turns.yaml")
    assert (code, summary["status"]) == (3, "budget_exhausted")
    assert summary["detail"].startswith("turns: 2 of 2 turns used")


def test_a_model_request_that_would_break_the_cost_budget_is_never_sent(cli, steering):
    code, summary = cli.run_json(steering / "cost.yaml")
    assert (code, summary["status"]) == (3, "budget_exhausted")
    events = cli.events(summary["run_id"])
    # the second request was never sent (a first one claimed twice is still turn 1)
    assert {r["turn"] for r in of_type(events, "ModelRequested")} == {1}
    [exhausted] = of_type(events, "RunBudgetExhausted")
    assert exhausted["budget"] == "cost" and exhausted["limit"] == 0.012
    assert 0 < exhausted["used"] <= exhausted["limit"]  # what was spent stayed within it


def test_a_run_past_its_wall_clock_ends_timeout_with_exit_4(cli, steering):
    code, summary = cli.run_json(steering / "timeout.yaml")
    assert (code, summary["status"]) == (4, "timeout")
    [timed_out] = of_type(cli.events(summary["run_id"]), "RunTimedOut")
    assert timed_out["elapsed_s"] >= 1.0


def test_a_refusal_goes_to_a_human_with_exit_6(cli, steering):
    code, summary = cli.run_json(steering / "refusal.yaml")
    assert (code, summary["status"]) == (6, "awaiting_human")
    assert "refused" in summary["detail"]


def test_cancel_during_a_cooperative_tool_records_cancelled_with_both_times(cli, steering, workers):
    run_id = submit(cli, steering / "cancel_cooperative.yaml")
    wait_for(cli, run_id, "ToolCallStarted")
    assert cli("cancel", "--as", cli.publisher(), run_id, "enough").returncode == 0
    events = wait_for(cli, run_id, "RunCancelled")
    [requested] = [e for e in events if e["type"] == "RunCancelRequested"]
    [stopped] = of_type(events, "ToolCallCancelled")
    assert stopped["requested_at"] == requested["at"]
    assert stopped["requested_at"] <= stopped["stopped_at"] < stopped["requested_at"] + 2
    code, summary = status(cli, run_id)
    assert (code, summary["status"]) == (5, "cancelled")


def test_cancel_during_a_subprocess_that_ignores_sigterm_force_terminates_it(
    cli, steering, workers
):
    run_id = submit(cli, steering / "cancel_stubborn.yaml")
    wait_for(cli, run_id, "ToolCallStarted")
    time.sleep(0.3)  # let the subprocess start and set its trap
    assert cli("cancel", "--as", cli.publisher(), run_id).returncode == 0
    events = wait_for(cli, run_id, "RunCancelled")
    [killed] = of_type(events, "ToolCallForceTerminated")
    grace = 1.0
    assert killed["terminated_at"] - killed["requested_at"] >= grace
    assert "SIGKILL" in killed["detail"]
    assert status(cli, run_id)[1]["tool_calls"] == [
        {"call_id": "z1", "name": "stubborn_sleep", "status": "force_terminated"}
    ]


def test_an_approved_call_runs_and_a_wrong_call_id_is_refused(cli, steering, workers):
    run_id = submit(cli, steering / "approval.yaml")
    wait_for(cli, run_id, "ApprovalRequested")
    refused = cli("approve", "--as", cli.publisher(), run_id, "nope")
    assert refused.returncode == 2 and "no call 'nope'" in refused.stderr
    assert (
        cli("approve", "--as", cli.publisher(), run_id, "p1", "ok", "--by", "bob").returncode == 0
    )
    wait_for(cli, run_id, "RunCompleted")
    [granted] = of_type(cli.events(run_id), "ApprovalGranted")
    assert granted["by"] == "bob"


def test_a_denied_call_never_runs_and_the_model_is_told(cli, steering, workers):
    run_id = submit(cli, steering / "approval.yaml")
    wait_for(cli, run_id, "ApprovalRequested")
    assert cli("deny", "--as", cli.publisher(), run_id, "p1", "not today").returncode == 0
    events = wait_for(cli, run_id, "ModelRequested")
    assert "ToolCallStarted" not in types(events)
    assert not (cli.workspace(run_id) / "note.txt").exists()
    [denied] = of_type(events, "ApprovalDenied")
    assert denied["note"] == "not today" and not denied["expired"]
    # the script's second turn ends it; its checks fail (nothing was published) and the
    # scripted model, out of turns, ends the run instead of inventing more
    events = wait_for(cli, run_id, "RunFailed")
    code, summary = status(cli, run_id)
    assert (code, summary["status"], summary["turns"]) == (1, "failed", 2)
    assert "the scripted model has no turn 3" in summary["detail"]


def test_a_human_reply_lets_a_repeating_run_go_on(cli, steering, workers):
    run_id = submit(cli, steering / "repeat.yaml")
    wait_for(cli, run_id, "RunEscalated")
    assert (
        cli("reply", "--as", cli.publisher(), run_id, "the file is called README.txt").returncode
        == 0
    )
    wait_for(cli, run_id, "HumanReplied")
    deadline = time.monotonic() + 20
    while status(cli, run_id)[1]["status"] not in ("completed", "failed", "awaiting_human"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    final = status(cli, run_id)[1]
    # counting started afresh: r4 failed once more without escalating, then the script ended
    assert final["status"] == "completed"
    assert [c["status"] for c in final["tool_calls"]] == ["failed"] * 4
    assert (
        cli("abort", "--as", cli.publisher(), run_id).returncode == 2
    )  # not awaiting a human any more


def test_abort_ends_a_run_awaiting_a_human_as_failed(cli, steering, workers):
    run_id = submit(cli, steering / "refusal.yaml")
    wait_for(cli, run_id, "RunEscalated")
    assert cli("abort", "--as", cli.publisher(), run_id, "no point").returncode == 0
    code, summary = status(cli, run_id)
    assert (code, summary["status"]) == (1, "failed")
    assert summary["detail"].startswith("aborted by ") and summary["detail"].endswith(": no point")
