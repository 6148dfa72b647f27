"""`agentledger run` on the inventory example, then the read commands on its log."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, copy_example, essential, of_type

TOOL_STEP = [
    "ToolCallProposed",
    "ToolCallValidated",
    "ToolCallScheduled",  # its resources' locks granted
    "ToolCallStarted",
    "ToolCallSucceeded",
]
INVENTORY_EVENTS = [
    "RunCreated",
    *["ModelRequested", "ModelResponded", *TOOL_STEP],  # lookup_stock
    *["ModelRequested", "ModelResponded", *TOOL_STEP],  # reserve_stock
    *["ModelRequested", "ModelResponded"],  # end_turn
    "AcceptanceStarted",
    "AcceptanceChecked",
    "AcceptanceChecked",
    "RunCompleted",
]


@dataclass
class Ran:
    cli: Cli
    example: Path
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    cli = make_cli(tmp_path_factory.mktemp("inventory"))
    example = copy_example("inventory", cli.cwd)
    code, summary = cli.run_json(example / "spec.yaml")
    return Ran(cli, example, code, summary, cli.events(summary["run_id"]))


def test_the_run_exits_0_with_a_json_summary_of_a_completed_run(ran: Ran) -> None:
    assert ran.code == 0
    assert ran.summary["run_id"].startswith("r-")
    assert ran.summary["status"] == "completed"
    assert ran.summary["turns"] == 3
    assert ran.summary["usage"]["input_tokens"] > 0
    assert ran.summary["usage"]["output_tokens"] > 0
    assert ran.summary["tool_calls"] == [
        {"call_id": "c17", "name": "lookup_stock", "status": "succeeded"},
        {"call_id": "c18", "name": "reserve_stock", "status": "succeeded"},
    ]


def test_the_log_holds_every_step_in_order_with_no_gaps(ran: Ran) -> None:
    assert essential(ran.events) == INVENTORY_EVENTS
    assert [e["seq"] for e in ran.events] == list(range(1, len(ran.events) + 1))
    assert {e["run_id"] for e in ran.events} == {ran.summary["run_id"]}
    checks = of_type(ran.events, "AcceptanceChecked")
    assert [c["passed"] for c in checks] == [True, True]
    assert checks[1]["evidence"]["output"]["available"] == 1


def test_status_json_repeats_the_summary_and_exits_0(ran: Ran) -> None:
    done = ran.cli("status", ran.summary["run_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ran.summary


def test_replay_refolds_the_log_and_exits_0(ran: Ran) -> None:
    done = ran.cli("replay", ran.summary["run_id"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"log ok: {len(ran.events)} events" in done.stdout


def test_runs_lists_the_run(ran: Ran) -> None:
    assert ran.cli.runs() == [ran.summary["run_id"]]


def test_the_run_changed_its_workspace_copy_and_not_the_example(ran: Ran) -> None:
    copy = json.loads((ran.cli.workspace(ran.summary["run_id"]) / "stock.json").read_text())
    original = json.loads((ran.example / "ws" / "stock.json").read_text())
    assert (copy["A1"]["available"], copy["A1"]["reserved"]) == (1, 2)
    assert (original["A1"]["available"], original["A1"]["reserved"]) == (3, 0)


def test_status_of_an_unknown_run_exits_2(ran: Ran) -> None:
    done = ran.cli("status", "r-does-not-exist")
    assert done.returncode == 2
    assert "r-does-not-exist" in done.stderr
