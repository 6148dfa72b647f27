"""Time travel through the CLI (issue 39) on the fix_tests example: the write call runs
between two snapshots of the run's workspace; `diff` shows exactly what it changed,
`status --files` lists it, and `checkout --turn 1` gives the original workspace back
byte for byte — into an empty folder only."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, copy_example, of_type, snapshot


@dataclass
class Ran:
    cli: Cli
    example: Path
    before: dict[str, bytes]
    run_id: str
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Ran:
    cli = make_cli(tmp_path_factory.mktemp("time_travel"))
    example = copy_example("fix_tests", cli.cwd)
    before = snapshot(example / "ws")
    code, summary = cli.run_json(example / "spec.yaml")
    assert code == 0, summary
    return Ran(cli, example, before, summary["run_id"], cli.events(summary["run_id"]))


def test_only_the_write_call_carries_snapshots(fixed: Ran) -> None:
    done = {e["call_id"]: e.get("snapshots") for e in of_type(fixed.events, "ToolCallSucceeded")}
    assert [c for c, s in done.items() if s is not None] == ["w1"]
    snaps = done["w1"]
    assert snaps["before"] != snaps["after"] and snaps["before"].startswith("sha256:")
    assert snaps.get("note") is None


def test_diff_shows_exactly_the_change_the_write_made(fixed: Ran) -> None:
    new = (fixed.cli.workspace(fixed.run_id) / "calc.py").read_text()
    old = fixed.before["calc.py"].decode()
    expected = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), "a/calc.py", "b/calc.py"
        )
    )
    done = fixed.cli("diff", fixed.run_id, "w1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    as_json = json.loads(fixed.cli("diff", fixed.run_id, "w1", "--json").stdout)
    assert [(c["path"], c["change"], c["diff"]) for c in as_json["changes"]] == [
        ("calc.py", "modified", expected)
    ]


def test_status_files_lists_what_each_write_changed(fixed: Ran) -> None:
    done = fixed.cli("status", fixed.run_id, "--files")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["turn 3  w1           write_file", "  M calc.py"]
    # then the acceptance check, and what its pytest left behind (byte code)
    assert lines[2] == "turn 5  check-1.1    command 'python -m pytest -q' exits 0 (passed)"
    assert lines[3:] and all(line.startswith("  A __pycache__/") for line in lines[3:])
    as_json = json.loads(fixed.cli("status", fixed.run_id, "--files", "--json").stdout)
    assert [(c["call_id"], c["files"]) for c in as_json["calls"][:1]] == [
        ("w1", [{"path": "calc.py", "change": "modified"}])
    ]


def test_diff_of_a_read_only_call_says_it_has_no_snapshots(fixed: Ran) -> None:
    done = fixed.cli("diff", fixed.run_id, "t1")
    assert done.returncode == 2
    assert "recorded no workspace snapshots" in done.stderr


def test_checkout_turn_1_gives_the_original_workspace_byte_for_byte(fixed: Ran) -> None:
    out = fixed.cli.cwd / "at-turn-1"
    done = fixed.cli("checkout", fixed.run_id, "--turn", "1", out)
    assert done.returncode == 0, done.stderr
    assert snapshot(out) == fixed.before
    later = fixed.cli.cwd / "at-turn-4"
    assert fixed.cli("checkout", fixed.run_id, "--turn", "4", later).returncode == 0
    fixed_calc = (fixed.cli.workspace(fixed.run_id) / "calc.py").read_bytes()
    assert snapshot(later) == {**fixed.before, "calc.py": fixed_calc}  # before acceptance's pytest


def test_checkout_refuses_a_folder_that_is_not_empty(fixed: Ran) -> None:
    out = fixed.cli.cwd / "busy"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    done = fixed.cli("checkout", fixed.run_id, "--turn", "1", out)
    assert done.returncode == 2
    assert "is not empty" in done.stderr
    assert snapshot(out) == {"mine.txt": b"keep me"}


def test_gc_frees_what_no_run_refers_to_and_keeps_the_runs_snapshots(fixed: Ran) -> None:
    import os
    import time

    from agentledger.events.workspace_tree import Entry, Tree
    from agentledger.services.adapters.snapshots.store import SnapshotStore

    store = SnapshotStore(fixed.cli.state_dir / "snapshots")  # made by the run
    (fixed.cli.cwd / "orphan").write_bytes(b"nobody's\n")
    digest, _ = store.put_file(str(fixed.cli.cwd / "orphan"), 1 << 20)
    orphan = store.put_tree(Tree({"orphan": Entry("file", digest, 9)}))
    then = time.time() - 2 * 3600
    for p in store.root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))
    done = fixed.cli("gc", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["freed_trees"], report["freed_blobs"], report["dry_run"]) == (1, 1, False)
    assert report["kept_trees"] == 3 and report["runs"] >= 1  # w1's two, and its check's after
    assert fixed.cli("diff", fixed.run_id, "w1").returncode == 0  # the run's own stay
    assert not store._tree(orphan).exists()


def test_snapshots_past_their_age_are_collected_and_diff_says_so(
    tmp_path: Path, make_cli: Callable[[Path], Cli]
) -> None:
    import dataclasses
    import os
    import time

    cli = make_cli(tmp_path)
    example = copy_example("fix_tests", cli.cwd)
    code, summary = cli.run_json(example / "spec.yaml")
    assert code == 0, summary
    then = time.time() - 2 * 3600
    for p in (cli.state_dir / "snapshots").rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))
    time.sleep(1.1)  # the run ended more than AGENTLEDGER_SNAPSHOT_KEEP_S=1 ago
    aged = dataclasses.replace(cli, env={**cli.env, "AGENTLEDGER_SNAPSHOT_KEEP_S": "1"})
    done = aged("gc")
    assert done.returncode == 0, done.stderr
    # w1's two trees and its check's after; 3 files, calc.py twice, pytest's 2 byte-code files
    assert done.stdout.startswith("freed 3 snapshots and 6 blobs")
    gone = cli("diff", summary["run_id"], "w1")
    assert gone.returncode == 1
    assert "is not in the snapshot store" in gone.stderr


def test_acceptance_records_the_workspace_it_judged_and_checkout_shows_it(fixed: Ran) -> None:
    (checked,) = of_type(fixed.events, "AcceptanceChecked")
    judged = checked["snapshots"]
    assert checked["passed"] and judged["before"].startswith("sha256:")
    listed = json.loads(fixed.cli("status", fixed.run_id, "--files", "--json").stdout)["calls"]
    check = listed[-1]
    assert (check["call_id"], check["check"], check["passed"]) == ("check-1.1", True, True)
    assert check["before"] == judged["before"]
    out = fixed.cli.cwd / "judged"
    done = fixed.cli("checkout", fixed.run_id, "--call", "check-1.1", out)
    assert done.returncode == 0, done.stderr
    fixed_calc = (fixed.cli.workspace(fixed.run_id) / "calc.py").read_bytes()
    seen = snapshot(out)
    assert seen["calc.py"] == fixed_calc and seen["test_calc.py"] == fixed.before["test_calc.py"]
    left = fixed.cli("diff", fixed.run_id, "check-1.1")  # what the check's pytest left behind
    assert left.returncode == 0 and "+++ b/__pycache__/" in left.stdout
    assert "binary files differ" in left.stdout
    unknown = fixed.cli("checkout", fixed.run_id, "--call", "check-9.9", fixed.cli.cwd / "no")
    assert unknown.returncode == 2 and "recorded no workspace snapshots" in unknown.stderr
