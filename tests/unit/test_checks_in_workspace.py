"""Acceptance checks touch the run's workspace and nothing else: a `file:` check
reads through `WorkspaceFiles` (a link out of the workspace, a FIFO or a file
with other names fails the check and nothing of what it points at is shown),
a run with no workspace never falls back to its spec's folder, and a command
check of such a run runs in a fresh empty folder that is removed afterwards.
(The handler unit's sandbox is off: the command runs as the test.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

from handlerkit import Unit, new_unit, spec

from agentledger.events.frozen import replace
from agentledger.events.state import RunState
from agentledger.schemas.spec import CommandCheck, FileCheck, ToolCheck
from agentledger.services.handlers.checks import Verdict, run_check

DONE = {"end_turn": "done"}


def _state(unit: Unit, workspace: Path | None) -> RunState:
    unit.create("run-a", spec(DONE))
    state = unit.state("run-a")
    return replace(state, workspace=str(workspace) if workspace else None)


def _file_check(unit: Unit, state: RunState, name: str, contains: str) -> Verdict:
    return run_check(unit.app, state, FileCheck(file=name, contains=contains))


def test_a_file_check_reads_a_file_of_the_workspace(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    (tmp_path / "ws" / "out.txt").write_text("all done\n")
    verdict = _file_check(unit, _state(unit, tmp_path / "ws"), "out.txt", "all done")
    assert verdict.passed and verdict.evidence["path"] == str(tmp_path / "ws" / "out.txt")
    assert "file:ws/out.txt" in verdict.depends_on


def test_a_file_check_through_a_link_to_etc_passwd_fails_and_shows_nothing_of_it(
    tmp_path: Path,
) -> None:
    unit = new_unit(tmp_path / "ws")
    os.symlink("/etc/passwd", tmp_path / "ws" / "passwd")
    os.symlink("/etc", tmp_path / "ws" / "etc")
    state = _state(unit, tmp_path / "ws")
    for name in ("passwd", "etc/passwd", "../../../../etc/passwd", "/etc/passwd"):
        verdict = _file_check(unit, state, name, "root")
        assert not verdict.passed, name
        assert "root:" not in json.dumps(verdict.evidence), name
        assert set(verdict.evidence) == {"reason"}
        assert verdict.evidence["reason"].startswith(f"{name!r} is not a file in the workspace: ")


def test_a_file_check_on_a_fifo_or_a_hard_link_fails_without_blocking(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    os.mkfifo(tmp_path / "ws" / "pipe")
    (tmp_path / "secret.txt").write_text("root:x:0:0\n")
    os.link(tmp_path / "secret.txt", tmp_path / "ws" / "twin.txt")
    state = _state(unit, tmp_path / "ws")
    for name in ("pipe", "twin.txt"):
        verdict = _file_check(unit, state, name, "root")
        assert not verdict.passed and "root:" not in json.dumps(verdict.evidence)


def test_a_run_with_no_workspace_never_reads_its_spec_folder(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    state = _state(unit, None)
    assert state.base_dir == str(tmp_path)
    (tmp_path / "out.txt").write_text("all done\n")  # in base_dir: not a workspace
    verdict = _file_check(unit, state, "out.txt", "all done")
    assert not verdict.passed
    assert verdict.evidence == {
        "reason": "'out.txt' is not a file in the workspace: the run has none"
    }


def test_a_command_check_of_a_run_with_no_workspace_runs_in_an_empty_folder_removed_afterwards(
    tmp_path: Path,
) -> None:
    unit = new_unit(tmp_path / "ws")
    (tmp_path / "out.txt").write_text("in the spec's folder\n")
    state = _state(unit, None)
    check = CommandCheck(command="pwd; ls -A | wc -l; touch made-here")
    verdict = run_check(unit.app, state, check)
    cwd = verdict.evidence["cwd"]
    assert verdict.passed, verdict.evidence
    assert cwd != state.base_dir and Path(cwd).name.startswith("agentledger-check-")
    assert verdict.evidence["stdout_tail"].split() == [cwd, "0"], "it saw an empty folder"
    assert not Path(cwd).exists(), "the folder is removed afterwards"
    assert not (tmp_path / "made-here").exists()


def test_a_command_check_runs_in_the_runs_workspace(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    (tmp_path / "ws" / "stock.json").write_text("{}")
    verdict = run_check(
        unit.app, _state(unit, tmp_path / "ws"), CommandCheck(command="test -f stock.json")
    )
    assert verdict.passed and verdict.evidence["cwd"] == str(tmp_path / "ws")


def test_a_failed_file_check_says_what_it_did_not_find(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    (tmp_path / "ws" / "out.txt").write_text("all done\n")
    state = _state(unit, tmp_path / "ws")
    missing = _file_check(unit, state, "out.txt", "42 reserved")
    assert (
        not missing.passed
        and missing.evidence["reason"] == "'42 reserved' not found in its 9 characters"
    )
    both = run_check(unit.app, state, FileCheck(file="out.txt", contains="x", matches="^[0-9]+$"))
    assert (
        both.evidence["reason"] == "'x' not found and no match for /^[0-9]+$/ in its 9 characters"
    )


def test_a_failed_command_check_records_its_exit_code_as_its_reason(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    check = CommandCheck(command="echo 'E   assert 2 == 3' >&2; exit 3")
    verdict = run_check(unit.app, _state(unit, tmp_path / "ws"), check)
    assert not verdict.passed and verdict.evidence["reason"] == "exit 3"
    assert verdict.evidence["stderr_tail"] == "E   assert 2 == 3\n"


def test_a_tool_check_says_what_came_back(tmp_path: Path) -> None:
    unit = new_unit(tmp_path / "ws")
    state = _state(unit, tmp_path / "ws")
    wrong = run_check(
        unit.app, state, ToolCheck(tool="kv_read", input={"key": "k"}, expect={"value": "w"})
    )
    assert wrong.evidence["reason"] == "got {'key': 'k', 'value': 'v'}"
    broken = run_check(unit.app, state, ToolCheck(tool="kv_ratio", input={"key": "k"}, expect={}))
    assert (
        broken.evidence["reason"]
        == "the tool failed: internal: ZeroDivisionError: division by zero"
    )
