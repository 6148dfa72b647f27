"""`agentledger intake` as an operator runs it: a process of its own that creates
the runs the workers then drive, loading no tool code (a tool module that marks
every process importing it is imported by the workers, never by the intake);
`workers --pools intake` is the same and refuses tool options; `--json` says what
it reads. A deployment agrees on one publishers file: an intake with another
refuses to start naming both files' digests, until an operator adopts it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from e2ekit import AGENTLEDGER, Cli, copy_example, of_type, start_intake, stop_workers, types

from agentledger.services.adapters.publishers.publishers_file import file_digest

MARKING_TOOLS = '''"""Tools that say which process imported them."""

import os
from pathlib import Path

Path(os.environ["MARKS"], str(os.getpid())).touch()

from agentledger import ToolContext, tool


@tool(read_only=True)
def look(ctx: ToolContext) -> dict:
    """Look."""
    return {"pid": os.getpid()}
'''
SPEC = """task: look
tools: [marking_tools]
principal: {id: u, tenant: t}
model:
  scripted:
    - tool_use: [{id: l1, name: look, input: {}}]
    - end_turn: done
"""


def test_the_intake_creates_runs_without_importing_the_tool_code_the_workers_run(
    cli: Cli, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "marking_tools.py").write_text(MARKING_TOOLS)
    (tmp_path / "spec.yaml").write_text(SPEC)
    cli.env["MARKS"] = str(marks)
    publisher = cli.publisher()
    workers = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--tools", "marking_tools", "--tool-path", str(tmp_path)],
        cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE,
    )  # fmt: skip
    intake = None
    try:
        assert workers.stdout is not None and "workers up" in workers.stdout.readline()
        intake = start_intake(cli)
        done = cli("submit", "--as", publisher, tmp_path / "spec.yaml")
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        cli.wait_ended([run_id], 60)
        status = json.loads(cli("status", run_id, "--json").stdout)
        assert status["status"] == "completed"
        importers = {int(p.name) for p in marks.iterdir()}
        assert workers.pid in importers and intake.pid not in importers
        threads = {t.name for t in _threads(intake.pid)}
        assert not any("worker" in t.lower() for t in threads), threads  # no dramatiq pool
    finally:
        stop_workers([workers, *([intake] if intake else [])])


def _threads(pid: int) -> list[Path]:
    return [Path(t, "comm") for t in Path(f"/proc/{pid}/task").iterdir()]


def test_the_intake_says_what_it_reads_in_json(cli: Cli) -> None:
    cli.publisher("billing")
    proc = subprocess.Popen(
        [*AGENTLEDGER, "intake", "--json"],
        cwd=cli.cwd,
        env=cli.env,
        text=True,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        said = json.loads(proc.stdout.readline())
        path = cli.state_dir / "publishers.yaml"
        assert (
            said["intake"] == "up" and said["publishers"] == ["billing"] and said["pid"] == proc.pid
        )
        assert said["publishers_file"] == str(path)
        assert said["publishers_digest"] == file_digest(path.read_bytes())
    finally:
        stop_workers([proc])


def test_workers_pools_intake_refuses_tool_options_and_company(cli: Cli, tmp_path: Path) -> None:
    example = copy_example("inventory", tmp_path)
    done = cli("workers", "--pools", "intake", "--tools", "inventory_tools", "--tool-path", example)
    (said,) = [line for line in done.stderr.splitlines() if "bad option" in line]  # one line
    assert (
        done.returncode == 2
        and "--pools intake loads no tool code: drop --tools, --tool-path" in said
    )
    done = cli("workers", "--pools", "intake,model")
    assert done.returncode == 2 and "intake runs alone" in done.stderr
    assert "Traceback" not in done.stderr


def test_workers_pools_intake_is_an_intake(cli: Cli) -> None:
    proc = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--pools", "intake"], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and "agentledger intake up" in proc.stdout.readline()
    finally:
        stop_workers([proc])


def test_another_publishers_file_refuses_to_start_until_it_is_adopted(
    cli: Cli, tmp_path: Path
) -> None:
    cli.publisher("billing")
    first = start_intake(cli)  # records this file's digest as the deployment's
    stop_workers([first])
    recorded = file_digest((cli.state_dir / "publishers.yaml").read_bytes())
    other = tmp_path / "other.yaml"
    other.write_text("publishers: {}\n")
    cli.env["AGENTLEDGER_PUBLISHERS"] = str(other)
    done = cli("intake")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    said = done.stderr
    assert str(other) in said and file_digest(other.read_bytes()) in said and recorded in said
    assert "agentledger publishers adopt" in said

    adopted = cli("publishers", "adopt", "--json")
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout) == {
        "file": str(other), "publishers_digest": file_digest(b"publishers: {}\n"), "before": recorded,
    }  # fmt: skip
    proc = start_intake(cli)
    stop_workers([proc])


def test_publishers_add_moves_the_deployments_record_along(cli: Cli, tmp_path: Path) -> None:
    cli.publisher("billing")
    intake = start_intake(cli)
    try:
        added = cli(
            "publishers", "add", "late", "--principal", "*@*", "--scopes", "*",
            "--workspaces", str(tmp_path), "--json",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        said = json.loads(added.stdout)
        assert said["recorded"] is True
        assert said["publishers_digest"] == file_digest(
            (cli.state_dir / "publishers.yaml").read_bytes()
        )
        example = copy_example("inventory", tmp_path)
        submitted = cli("submit", "--as", "late", "--unserved", example / "spec.yaml")
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        # the running intake reads the new publisher's stream, under the file as it is now
        events = cli.wait_events(run_id, lambda seen: "RunCreated" in types(seen), 30)
        assert of_type(events, "RunCreated")[0]["publisher"] == "late"
    finally:
        stop_workers([intake])
