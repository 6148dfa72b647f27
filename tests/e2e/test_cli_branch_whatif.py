"""Branch and what-if through the CLI (issue 39), on the whatif example. A run writes a note, stamps the
workspace with its tool's version, writes another note; `branch --turn 3` with a new
version of the tools takes turns 1-2 from the origin (nothing runs again) and runs
turn 3 on; `whatif --turn 2` with the new version names turn 2's call as the first
divergence, stops there, and lists the files that end up different. A publisher of
another tenant cannot branch the run, neither through the CLI nor by a request of
its own naming it; a branch keeps its origin's principal."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, copy_example, of_type, snapshot


@dataclass
class Origin:
    cli: Cli
    run_id: str


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Origin:
    cli = make_cli(tmp_path_factory.mktemp("whatif"))
    example = copy_example("whatif", cli.cwd)
    cli = dataclasses.replace(cli, cwd=example)  # the spec's, CHANGES' and the tools' folder
    code, summary = cli.run_json(example / "spec.yaml")
    assert code == 0, summary
    return Origin(cli, summary["run_id"])


def _created(cli: Cli, run_id: str) -> dict[str, Any]:
    (created,) = of_type(cli.events(run_id), "RunCreated")
    return created


def test_whatif_names_turn_2s_call_as_the_first_divergence_and_the_files_that_differ(
    origin: Origin,
) -> None:
    cli = origin.cli
    done = cli("whatif", origin.run_id, "--turn", "2", "--spec", "v2.yaml", "--json")
    assert done.returncode == 1, done.stderr  # something differs
    report = json.loads(done.stdout)
    first = report["first_divergence"]
    assert (first["turn"], first["id"], first["name"]) == (2, "s1", "stamp")
    assert first["origin"] == 'stamp({}) -> ok "v1"' and first["branch"] == 'stamp({}) -> ok "v2"'
    assert report["writes"] == [{"call_id": "s1", "turn": 2, "files": ["stamp.txt"]}]
    assert report["files"] == [
        {"path": "b.txt", "change": "removed"},  # the branch stopped before writing it
        {"path": "stamp.txt", "change": "modified"},
    ]
    assert report["checks"] == [
        {"check_id": "check-1.1", "check": "file 'stamp.txt' matches /v1/",
         "origin": "passed", "branch": "not run"}
    ]  # fmt: skip
    branch = cli.events(report["branch"])
    assert [e["call_id"] for e in of_type(branch, "ToolCallProposed")] == ["n1", "s1"]  # stopped
    assert "departed from" in of_type(branch, "RunFailed")[0]["reason"] + report["detail"]
    text = cli("whatif", origin.run_id, "--turn", "2", "--spec", "v2.yaml").stdout
    assert "first divergence: turn 2, s1 (stamp): outcome, files" in text
    assert "  M stamp.txt" in text and "  D b.txt" in text


def test_whatif_of_a_change_that_changes_nothing_reports_no_difference(origin: Origin) -> None:
    cli = origin.cli
    (cli.cwd / "budget.yaml").write_text("budgets: {max_turns: 7}\n")
    done = cli("whatif", origin.run_id, "--turn", "1", "--spec", "budget.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no difference" in done.stdout


def test_branch_takes_the_turns_before_from_the_origin_and_runs_nothing_again(
    origin: Origin,
) -> None:
    cli = origin.cli
    done = cli("branch", origin.run_id, "--turn", "3", "--spec", "v2.yaml", "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert (made["origin"], made["turn"], made["status"]) == (origin.run_id, 3, "completed")
    created = _created(cli, made["run_id"])
    assert created["spec"]["branch"] == {"run_id": origin.run_id, "turn": 3}
    assert created["spec"]["tools"] == ["notes_v2"]
    shown = cli("status", made["run_id"])
    assert f"  branch of {origin.run_id} from turn 3" in shown.stdout
    done_calls = {e["call_id"]: e for e in of_type(cli.events(made["run_id"]), "ToolCallSucceeded")}
    assert done_calls["n1"]["replay_of"] == f"{origin.run_id}/n1"  # taken, not run
    assert done_calls["s1"]["output"] == "v1" and done_calls["s1"]["replay_of"]
    assert done_calls["n2"].get("replay_of") is None  # turn 3 ran, with the new version
    assert snapshot(cli.workspace(made["run_id"])) == {
        "readme.txt": b"start\n", "a.txt": b"hello\n", "stamp.txt": b"v1\n", "b.txt": b"bye\n",
    }  # fmt: skip


def test_a_branch_keeps_its_origins_principal_and_bad_changes_are_named(origin: Origin) -> None:
    cli = origin.cli
    (cli.cwd / "boss.yaml").write_text("principal: {id: root, tenant: dev-1, scopes: ['*']}\n")
    done = cli("branch", origin.run_id, "--turn", "2", "--spec", "boss.yaml")
    assert done.returncode == 2
    assert "may not change 'principal'" in done.stderr
    (cli.cwd / "typo.yaml").write_text("toolz: [notes_v2]\n")
    typo = cli("branch", origin.run_id, "--turn", "2", "--spec", "typo.yaml")
    assert typo.returncode == 2
    (line,) = [x for x in typo.stderr.splitlines() if "toolz" in x]
    assert "the branch's spec is not valid: toolz:" in line
    late = cli("branch", origin.run_id, "--turn", "9")
    assert late.returncode == 2 and "has 4 turns: no turn 9" in late.stderr
    replayed = cli("whatif", origin.run_id, "--turn", "2", "--spec", "boss.yaml")
    assert replayed.returncode == 2 and "may not change 'principal'" in replayed.stderr


def test_a_publisher_of_another_tenant_cannot_branch_the_run(origin: Origin) -> None:
    cli = origin.cli
    added = cli("publishers", "add", "mallory", "--principal", "*@other", "--scopes", "*",
                "--queues", "*", "--workspaces", str(cli.cwd))  # fmt: skip
    assert added.returncode == 0 or "already" in added.stderr, added.stderr
    before = set(cli.runs())
    done = cli("branch", origin.run_id, "--turn", "2", "--as", "mallory")
    assert done.returncode == 2
    assert "mallory" in done.stderr and "dev-1" in done.stderr
    # a request of its own naming the run as its origin, for a principal of its tenant
    theirs = (cli.cwd / "spec.yaml").read_text().replace("tenant: dev-1", "tenant: other") + (
        f"branch: {{run_id: {origin.run_id}, turn: 2}}\n"
    )
    (cli.cwd / "theirs.yaml").write_text(theirs)
    refused = cli("run", "theirs.yaml", "--as", "mallory")
    assert refused.returncode == 2
    assert f"may not replay run {origin.run_id!r}" in refused.stderr
    assert set(cli.runs()) == before  # no run was created


def test_a_branch_gains_no_scope_its_publishers_grant_lacks(origin: Origin) -> None:
    cli = origin.cli
    added = cli("publishers", "add", "narrow", "--principal", "*@dev-1", "--scopes", "notes:read",
                "--queues", "*", "--workspaces", str(cli.cwd))  # fmt: skip
    assert added.returncode == 0 or "already" in added.stderr, added.stderr
    before = set(cli.runs())
    done = cli("branch", origin.run_id, "--turn", "2", "--as", "narrow")
    assert done.returncode == 2
    assert "'narrow' may not grant the scopes ['notes:write']" in done.stderr
    assert set(cli.runs()) == before


def test_an_archived_run_is_branched_and_compared_as_one_in_redis(
    tmp_path: Path, make_cli: Callable[[Path], Cli]
) -> None:
    cli = make_cli(tmp_path)
    cli = dataclasses.replace(cli, cwd=copy_example("whatif", cli.cwd))
    code, summary = cli.run_json(cli.cwd / "spec.yaml")
    assert code == 0, summary
    archived = cli("archive", "--older-than", "0", "--json")
    assert archived.returncode == 0, archived.stderr
    assert json.loads(archived.stdout)["archived"] == [summary["run_id"]]  # out of Redis
    done = cli("whatif", summary["run_id"], "--turn", "2", "--spec", "v2.yaml", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["first_divergence"]["id"] == "s1"
    made = json.loads(cli("branch", summary["run_id"], "--turn", "3", "--json").stdout)
    assert made["status"] == "completed"
    replayed = {
        e["call_id"]: e.get("replay_of")
        for e in of_type(cli.events(made["run_id"]), "ToolCallSucceeded")
    }
    assert replayed["n1"] == f"{summary['run_id']}/n1"
