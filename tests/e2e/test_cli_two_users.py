"""Two users, two folders, each with a `tools.py` defining a tool of the same
name, run `agentledger run` at the same time on one Redis: every call of each
run is executed by its own user's code, in its own user's process — as the
tools themselves record it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from e2ekit import AGENTLEDGER, COMMAND_TIMEOUT_S, Cli

TOOLS = '''"""{owner}'s tools."""

import os
from pathlib import Path

from services.tools import ToolContext, tool


@tool(writes=lambda a, ws: [f"note:{{ws}}"])
def note(text: str, ctx: ToolContext) -> dict:
    """Write a note."""
    with open(Path(ctx.workspace, "ran.log"), "a") as f:
        f.write(f"{{ctx.call_id}} {owner} {{os.getpid()}}\\n")
    return {{"by": "{owner}"}}
'''

CALLS = 8
SPEC = "task: note things\ntools: [tools]\nworkspace: ./ws\nprincipal: {id: u, tenant: t}\n"
SPEC += "budgets: {max_turns: 12}\nmodel:\n  scripted:\n"
SPEC += "".join(
    f"    - tool_use: [{{id: n{i}, name: note, input: {{text: '{i}'}}}}]\n" for i in range(CALLS)
)
SPEC += "    - end_turn: done\n"


def _folder(root: Path, owner: str) -> Path:
    folder = root / owner
    (folder / "ws").mkdir(parents=True)
    (folder / "tools.py").write_text(TOOLS.format(owner=owner))
    (folder / "spec.yaml").write_text(SPEC)
    return folder


def test_two_users_runs_with_same_named_tools_each_run_only_their_own_code(
    tmp_path: Path, cli: Cli
) -> None:
    folders = {owner: _folder(tmp_path, owner) for owner in ("carol", "dave")}
    runs = {
        owner: subprocess.Popen(
            [*AGENTLEDGER, "run", "--json", "spec.yaml"], cwd=folder, env=cli.env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for owner, folder in folders.items()
    }
    done = {owner: p.communicate(timeout=COMMAND_TIMEOUT_S * 2) for owner, p in runs.items()}

    for owner, proc in runs.items():
        assert proc.returncode == 0, f"{owner}: {done[owner][1][-2000:]}"
        ran = (folders[owner] / "ws" / "ran.log").read_text().splitlines()
        owners = [line.split()[1] for line in ran]
        assert owners == [owner] * CALLS, f"{owner}'s run executed: {owners}"
        assert len({line.split()[2] for line in ran}) == 1  # one process: its own `run`
