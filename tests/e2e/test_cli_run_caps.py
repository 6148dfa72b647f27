"""A tenant's cap of live runs on a task queue as an operator and a user see it:
with `AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT=default=1`, a tenant's second run is
created and held — `status` says `held` and its place, `runs` lists it — and it
starts (and completes) once the first run ends (cancelled here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from e2ekit import AGENTLEDGER, Cli, start_intake, stop_workers

TOOLS = '''"""A tool for the test's workers."""

from agentledger import ToolContext, tool


@tool(read_only=True)
def look(ctx: ToolContext) -> dict:
    """Look."""
    return {}
'''
SPEC = """task: {task}
tools: [capped_tools]
principal: {{id: u, tenant: t}}
model:
  scripted:
    - end_turn: done
      delay_s: {delay}
"""


def test_a_run_past_its_tenants_cap_is_held_visibly_then_started_when_the_first_ends(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "capped_tools.py").write_text(TOOLS)
    (tmp_path / "slow.yaml").write_text(SPEC.format(task="slow", delay=20))
    (tmp_path / "quick.yaml").write_text(SPEC.format(task="quick", delay=0))
    cli.env["AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT"] = "default=1"
    publisher = cli.publisher()
    workers = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--tools", "capped_tools", "--tool-path", str(tmp_path)],
        cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE,
    )  # fmt: skip
    intake = None
    try:
        assert workers.stdout is not None and "workers up" in workers.stdout.readline()
        intake = start_intake(cli)
        first = cli("submit", "--as", publisher, tmp_path / "slow.yaml").stdout.strip()
        second = cli("submit", "--as", publisher, tmp_path / "quick.yaml").stdout.strip()
        shown = cli("status", second)
        assert shown.returncode == 9, shown.stderr  # not ended
        assert "held" in shown.stdout and "place 1 in the line of tenant 't'" in shown.stdout, (
            shown.stdout
        )
        assert json.loads(cli("status", second, "--json").stdout)["status"] == "held"
        listed = cli("runs", "--json")
        rows = {r["run_id"]: r["status"] for r in json.loads(listed.stdout)["runs"]}
        assert rows[second] == "held", listed.stdout
        cancelled = cli("cancel", "--as", publisher, first, "not needed")
        assert cancelled.returncode == 0, cancelled.stderr
        cli.wait_ended([first, second], 60)
        ended = {
            r: json.loads(cli("status", r, "--json").stdout)["status"] for r in (first, second)
        }
        assert ended == {first: "cancelled", second: "completed"}
        told = cli("tail", "--run", second).stdout
        assert "RunHeld" in told and "RunReleased" in told, told
    finally:
        stop_workers([workers, *([intake] if intake else [])])
