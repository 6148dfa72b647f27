"""Causes shown where a user looks, through the CLI: a failed command check's
line names its exit code and the last lines it wrote; a run that failed
acceptance says so first in `status` and in `run`'s last line, then what the
model did after; a write answered from the idempotency ledger is marked in the
live timeline and in `tail`; a tool's unexpected exception is recorded with its
traceback and logged once with the run, call, tool and pool, and the tool's own
log lines name its call and the tools pool."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from e2ekit import AGENTLEDGER, Cli, copy_example, of_type

STDERR_CHECK = "python -c \"import sys; print('collecting'); sys.exit('E   assert 2 == 3')\""
RESERVE = {"name": "reserve_stock", "input": {"sku": "A1", "qty": 2}}
DIVIDE_TOOLS = '''
import logging

from agentledger import ToolContext, tool

log = logging.getLogger("divide_tools")


@tool(read_only=True, reads=lambda a: ["calc:q"])
def divide(a: int, b: int, ctx: ToolContext) -> dict:
    """Divides a by b, with no guard against zero."""
    log.info("dividing %s by %s", a, b)
    return {"q": a / b}
'''


def failing_spec(example: Path) -> Path:
    """The model claims success twice and its script ends while turns are left: its
    checks fail (pytest on stdout, a command on stderr), then the model has no turn."""
    spec = yaml.safe_load((example / "spec_claims_success.yaml").read_text())
    spec["budgets"] = {"max_turns": 4}
    spec["acceptance"] = [{"command": "python -m pytest -q"}, {"command": STDERR_CHECK}]
    path = example / "claims_with_turns_left.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_failed_acceptance_is_told_first_with_each_checks_exit_code_and_output(
    cli: Cli, tmp_path: Path
) -> None:
    done = cli("run", failing_spec(copy_example("fix_tests", tmp_path)))
    assert done.returncode == 1, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    run_id = last.split()[1].rstrip(":")
    assert last.startswith(f"run {run_id}: failed  acceptance failed (2 of 2 checks: "
                           "command 'python -m pytest -q' exits 0: exit 1; stdout: …")  # fmt: skip
    assert "assert -1 == 5" in last
    assert "); then: model request failed (turn 3): the scripted model has no turn 3" in last

    timeline = cli("tail", "--run", run_id).stdout.splitlines()
    fails = [ln for ln in timeline if "AcceptanceChecked" in ln and " FAIL " in ln]
    assert len(fails) == 4  # two checks, twice
    assert any(
        "exits 0: exit 1; stdout: …FAILED test_calc.py::test_add - assert -1 == 5" in ln
        for ln in fails
    )
    assert sum(ln.endswith("exits 0: exit 1; stderr: E   assert 2 == 3") for ln in fails) == 2

    status = cli("status", run_id)
    assert status.returncode == 1
    detail = status.stdout.splitlines()[3].strip()
    assert detail.startswith(
        "acceptance failed (2 of 2 checks: command 'python -m pytest -q' exits 0: exit 1"
    )
    assert "then: model request failed (turn 3): the scripted model has no turn 3" in detail
    summary = json.loads(cli("status", "--json", run_id).stdout)
    assert summary["detail"] == detail


def test_a_write_answered_from_the_ledger_is_marked_in_the_live_timeline_and_in_tail(
    cli: Cli, tmp_path: Path
) -> None:
    example = copy_example("inventory", tmp_path)
    spec = yaml.safe_load((example / "spec.yaml").read_text())
    spec["model"]["scripted"] = [  # the same reservation proposed again, under a new call id
        {"tool_use": [{"id": "c18", **RESERVE}]},
        {"tool_use": [{"id": "c19", **RESERVE}]},
        {"end_turn": "2 are reserved."},
    ]
    (example / "twice.yaml").write_text(yaml.safe_dump(spec))

    done = cli("run", example / "twice.yaml")

    assert done.returncode == 0, done.stdout + done.stderr  # available 1: reserved once
    run_id = done.stdout.strip().splitlines()[-1].split()[1].rstrip(":")
    mark = "answered from the ledger, not run again"
    for printed in (done.stdout, cli("tail", "--run", run_id).stdout):
        succeeded = [ln for ln in printed.splitlines() if "ToolCallSucceeded" in ln]
        assert [mark in ln for ln in succeeded] == [False, True]
        assert f"c19 {mark} (done as {run_id}/c18/1)" in succeeded[1]
    replayed = {
        e["call_id"]: e["replay_of"] for e in of_type(cli.events(run_id), "ToolCallSucceeded")
    }
    assert replayed == {"c18": None, "c19": f"{run_id}/c18/1"}


def test_a_tools_exception_is_recorded_with_its_traceback_and_logged_once_with_its_ids(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "divide_tools.py").write_text(DIVIDE_TOOLS)
    (tmp_path / "ws").mkdir()
    spec = {
        "task": "Divide 1 by 0.", "workspace": "./ws", "tools": ["divide_tools"],
        "principal": {"id": "alice", "tenant": "t1"}, "budgets": {"max_turns": 3},
        "model": {"scripted": [
            {"tool_use": [{"id": "d1", "name": "divide", "input": {"a": 1, "b": 0}}]},
            {"end_turn": "done"},
        ]},
    }  # fmt: skip
    (tmp_path / "divide.yaml").write_text(yaml.safe_dump(spec))

    done = subprocess.run(
        [*AGENTLEDGER, "--log-format", "json", "--log-level", "info", "run", "--json", "divide.yaml"],
        cwd=tmp_path, env=cli.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["run_id"]
    [failed] = of_type(cli.events(run_id), "ToolCallFailed")
    assert failed["error"]["message"] == "ZeroDivisionError: division by zero"
    trace = failed["traceback"]
    assert trace.startswith("Traceback (most recent call last):")
    assert "divide_tools.py" in trace and "in divide" in trace and "a / b" in trace
    assert trace.endswith("ZeroDivisionError: division by zero")
    records = [json.loads(ln) for ln in done.stderr.splitlines() if ln.startswith("{")]
    [own] = [r for r in records if r["logger"] == "divide_tools"]
    assert (own["message"], own["run_id"], own["call_id"], own["pool"]) == (
        "dividing 1 by 0",
        run_id,
        "d1",
        "tools",
    )
    [raised] = [r for r in records if "raised" in r["message"]]
    assert (
        raised["message"]
        == f"tool 'divide' raised ZeroDivisionError in run {run_id}, call d1 (pool tools)"
    )
    assert (raised["run_id"], raised["call_id"], raised["pool"]) == (run_id, "d1", "tools")
    assert "ZeroDivisionError: division by zero" in raised["traceback"]
    assert "Traceback" not in done.stdout
