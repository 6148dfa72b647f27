"""The fix_tests example: a run that fixes a bug in its own copy of the
workspace completes on pytest's evidence; a model that only claims success
does not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import EXAMPLES, Cli, copy_example, essential, of_type, snapshot, types

TOOL_STEP = [
    "ToolCallProposed",
    "ToolCallValidated",
    "ToolCallScheduled",  # its resources' locks granted
    "ToolCallStarted",
    "ToolCallSucceeded",
]
MODEL_STEP = ["ModelRequested", "ModelResponded"]
FIX_EVENTS = [
    "RunCreated",
    *[*MODEL_STEP, *TOOL_STEP] * 4,  # run_tests, read_file, write_file, run_tests
    *MODEL_STEP,  # end_turn "tests pass now"
    "AcceptanceStarted",
    "AcceptanceChecked",
    "RunCompleted",
]


@dataclass
class Ran:
    cli: Cli
    example: Path
    before: dict[str, bytes]
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    cli = make_cli(tmp_path_factory.mktemp("fix_tests"))
    example = copy_example("fix_tests", cli.cwd)
    before = snapshot(example / "ws")
    code, summary = cli.run_json(example / "spec.yaml")
    return Ran(cli, example, before, code, summary, cli.events(summary["run_id"]))


def test_the_fix_run_exits_0_and_completes(fixed: Ran) -> None:
    assert fixed.code == 0, fixed.summary
    assert fixed.summary["status"] == "completed"
    assert [(c["call_id"], c["name"], c["status"]) for c in fixed.summary["tool_calls"]] == [
        ("t1", "run_tests", "succeeded"),
        ("r1", "read_file", "succeeded"),
        ("w1", "write_file", "succeeded"),
        ("t2", "run_tests", "succeeded"),
    ]


def test_the_log_shows_tests_failing_then_passing_then_accepted(fixed: Ran) -> None:
    assert essential(fixed.events) == FIX_EVENTS
    outputs = {e["call_id"]: e["output"] for e in of_type(fixed.events, "ToolCallSucceeded")}
    assert (outputs["t1"]["exit_code"], outputs["t1"]["passed"]) == (1, False)
    assert "test_add" in outputs["t1"]["tail"]
    assert (outputs["t2"]["exit_code"], outputs["t2"]["passed"]) == (0, True)
    [check] = of_type(fixed.events, "AcceptanceChecked")
    assert check["passed"] is True
    assert check["evidence"]["exit_code"] == 0
    assert check["evidence"]["cwd"] == str(fixed.cli.workspace(fixed.summary["run_id"]))


def test_the_fix_lands_in_the_workspace_copy_only(fixed: Ran) -> None:
    copy = fixed.cli.workspace(fixed.summary["run_id"])
    assert "return a + b" in (copy / "calc.py").read_text()
    assert snapshot(fixed.example / "ws") == fixed.before
    assert "return a - b" in (EXAMPLES / "fix_tests" / "ws" / "calc.py").read_text()


def test_a_model_that_only_claims_success_does_not_complete_the_run(
    cli: Cli, tmp_path: Path
) -> None:
    example = copy_example("fix_tests", tmp_path)
    code, summary = cli.run_json(example / "spec_claims_success.yaml")
    assert code == 1
    assert summary["status"] == "failed"
    assert "python -m pytest -q" in summary["detail"]
    assert summary["tool_calls"] == []
    events = cli.events(summary["run_id"])
    checks = of_type(events, "AcceptanceChecked")
    assert checks and not any(c["passed"] for c in checks)
    assert len(of_type(events, "AcceptanceFailed")) == 1  # the failure went back to the model
    assert types(events)[-1] == "RunFailed"
    assert of_type(events, "RunFailed")[0]["reason"] == "acceptance_failed"
    timeline = cli("tail", "--run", summary["run_id"]).stdout
    assert any("AcceptanceChecked" in line and "FAIL" in line for line in timeline.splitlines())
    assert "return a - b" in (cli.workspace(summary["run_id"]) / "calc.py").read_text()


def test_a_second_fix_run_in_the_same_folder_writes_its_own_copy(fixed: Ran) -> None:
    """Files are named with their workspace: the ledger does not replay the first
    run's write for the second run's copy (it would, with `file:calc.py`)."""
    code, summary = fixed.cli.run_json(fixed.example / "spec.yaml")
    assert code == 0, summary
    copy = fixed.cli.workspace(summary["run_id"])
    assert "return a + b" in (copy / "calc.py").read_text()
    events = fixed.cli.events(summary["run_id"])
    [write] = [e for e in of_type(events, "ToolCallSucceeded") if e["call_id"] == "w1"]
    assert write["replay_of"] is None
