"""What happens to tool calls the model should not have made: each is refused,
the refusal is recorded and goes back to the model as an error result, and the
run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from e2ekit import Cli, by_call, copy_example, of_type

REJECTED = ["ToolCallProposed", "ToolCallRejected"]
FAILED = [
    "ToolCallProposed",
    "ToolCallValidated",
    "ToolCallScheduled",
    "ToolCallStarted",
    "ToolCallFailed",
]
SUCCEEDED = [
    "ToolCallProposed",
    "ToolCallValidated",
    "ToolCallScheduled",
    "ToolCallStarted",
    "ToolCallSucceeded",
]


def write_spec(folder: Path, name: str, changes: dict[str, Any]) -> Path:
    spec = yaml.safe_load((folder / "spec.yaml").read_text())
    spec.update(changes)
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def errors(events: list[dict[str, Any]], type_: str) -> dict[str, dict[str, Any]]:
    return {e["call_id"]: e["error"] for e in of_type(events, type_)}


def test_a_scripted_call_to_a_tool_the_run_does_not_have_is_refused_before_it_starts(
    cli: Cli, tmp_path: Path
) -> None:
    example = copy_example("inventory", tmp_path)
    calls = [{"id": "u1", "name": "drop_table", "input": {}}]
    spec = write_spec(example, "unknown.yaml", {"model": {"scripted": [{"tool_use": calls}]}})

    done = cli("run", spec)

    assert done.returncode == 2, done.stdout + done.stderr
    assert "model.scripted.0.tool_use.0.name" in done.stderr
    assert "no tool 'drop_table'" in done.stderr and "lookup_stock" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_arguments_and_missing_scopes_are_rejected_and_the_run_goes_on(
    cli: Cli, tmp_path: Path
) -> None:
    example = copy_example("inventory", tmp_path)
    calls = [
        {"id": "b1", "name": "lookup_stock", "input": {}},
        {"id": "b2", "name": "lookup_stock", "input": {"sku": "A1", "color": "red"}},
        {"id": "p1", "name": "reserve_stock", "input": {"sku": "A1", "qty": 1}},
        {"id": "ok", "name": "lookup_stock", "input": {"sku": "A1"}},
    ]
    spec = write_spec(
        example,
        "mistakes.yaml",
        {
            "principal": {"id": "carol", "tenant": "shop-1", "scopes": ["stock:read"]},
            "model": {"scripted": [{"tool_use": calls}, {"end_turn": "nothing reserved"}]},
            "acceptance": [
                {"tool": "lookup_stock", "input": {"sku": "A1"}, "expect": {"available": 3}}
            ],
        },
    )

    code, summary = cli.run_json(spec)

    assert code == 0, summary
    statuses = {c["call_id"]: c["status"] for c in summary["tool_calls"]}
    assert statuses == {
        "b1": "rejected",
        "b2": "rejected",
        "p1": "rejected",
        "ok": "succeeded",
    }
    events = cli.events(summary["run_id"])
    for call_id in ("b1", "b2", "p1"):
        assert by_call(events, call_id) == REJECTED
    assert by_call(events, "ok") == SUCCEEDED
    rejected = errors(events, "ToolCallRejected")
    assert rejected["b1"]["code"] == "invalid_arguments"
    assert [f["loc"] for f in rejected["b1"]["fields"]] == ["sku"]
    assert rejected["b2"]["code"] == "invalid_arguments"
    assert [f["loc"] for f in rejected["b2"]["fields"]] == ["color"]
    assert rejected["p1"]["code"] == "permission_denied"
    # the model got its turn back after the refusals: turn 2 was asked for and answered
    assert [r["turn"] for r in of_type(events, "ModelResponded")] == [1, 2]
    assert summary["turns"] == 2


def test_paths_outside_the_workspace_and_the_tests_are_refused_and_nothing_changes(
    cli: Cli, tmp_path: Path
) -> None:
    example = copy_example("fix_tests", tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    (example / "ws" / "link_out").symlink_to(outside / "secret.txt")
    (example / "ws" / "dir_out").symlink_to(outside, target_is_directory=True)
    calls = [
        {"id": "up", "name": "read_file", "input": {"path": "../../../fix_tests/spec.yaml"}},
        {"id": "abs", "name": "read_file", "input": {"path": str(outside / "secret.txt")}},
        {"id": "link", "name": "read_file", "input": {"path": "link_out"}},
        {"id": "dir", "name": "read_file", "input": {"path": "dir_out/secret.txt"}},
        {"id": "w_up", "name": "write_file", "input": {"path": "../escaped.txt", "content": "x"}},
        {
            "id": "w_dir",
            "name": "write_file",
            "input": {"path": "dir_out/planted.txt", "content": "x"},
        },
        {"id": "w_test", "name": "write_file", "input": {"path": "test_calc.py", "content": ""}},
        {"id": "gone", "name": "read_file", "input": {"path": "missing.py"}},
        {"id": "ok", "name": "read_file", "input": {"path": "calc.py"}},
    ]
    spec = write_spec(
        example,
        "escape.yaml",
        {"model": {"scripted": [{"tool_use": calls}, {"end_turn": "done"}]}, "acceptance": []},
    )

    code, summary = cli.run_json(spec)

    assert code == 0, summary
    events = cli.events(summary["run_id"])
    # a path that climbs out or is absolute names no file in the workspace: its lock
    # name (file_resource) refuses it, so the call is rejected before it runs
    rejected = errors(events, "ToolCallRejected")
    for call_id in ("up", "abs", "w_up"):
        assert by_call(events, call_id) == REJECTED
        assert rejected[call_id]["code"] == "permission_denied", rejected[call_id]
        assert "leads outside the workspace" in rejected[call_id]["message"]
    failed = errors(events, "ToolCallFailed")
    for call_id in ("link", "dir", "w_dir", "w_test"):  # found out only when it runs
        assert by_call(events, call_id) == FAILED
        assert failed[call_id]["code"] == "permission_denied", failed[call_id]
    assert failed["gone"]["code"] == "not_found"
    assert by_call(events, "ok") == SUCCEEDED
    assert not (tmp_path / ".agentledger" / "workspaces" / "escaped.txt").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    copy = cli.workspace(summary["run_id"])
    assert "def test_add" in (copy / "test_calc.py").read_text()
    # the copy keeps links as links: following them would copy outside files in
    assert (copy / "link_out").is_symlink() and (copy / "dir_out").is_symlink()
    assert "SECRET" not in str(of_type(events, "ToolCallSucceeded"))
