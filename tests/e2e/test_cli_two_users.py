"""Two users, two folders, each with a `tools.py` defining a tool of the same
name, run `agentledger run` at the same time on one Redis: every call of each
run is executed by its own user's code, in its own user's process — as the
tools themselves record it. With two state folders too (two users' own
publishers files and keys): each embedded run publishes as its folder's own
publisher and its intake reads only that publisher's streams, so neither takes
the other's request, however often they start together."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2ekit import (
    AGENTLEDGER,
    COMMAND_TIMEOUT_S,
    Cli,
    clean_environ,
    of_type,
    start_intake,
    stop_workers,
)

from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.adapters.redis.local_server import start_server

TOOLS = '''"""{owner}'s tools."""

import os
from pathlib import Path

from agentledger import ToolContext, tool


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
            [*AGENTLEDGER, "run", "--json", "spec.yaml"],
            cwd=folder,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for owner, folder in folders.items()
    }
    done = {owner: p.communicate(timeout=COMMAND_TIMEOUT_S * 2) for owner, p in runs.items()}

    for owner, proc in runs.items():
        assert proc.returncode == 0, f"{owner}: {done[owner][1][-2000:]}"
        run_id = json.loads(done[owner][0].strip().splitlines()[-1])["run_id"]
        ran = (cli.workspace(run_id) / "ran.log").read_text().splitlines()  # the run's copy
        owners = [line.split()[1] for line in ran]
        assert owners == [owner] * CALLS, f"{owner}'s run executed: {owners}"
        assert len({line.split()[2] for line in ran}) == 1  # one process: its own `run`


ROUNDS = 4


def test_two_state_folders_running_at_once_on_one_redis_all_complete(tmp_path: Path) -> None:
    """The runs that refused each other ("bad signature … 'local''s key", 8 of 9 tries)."""
    server = start_server(tmp_path / "redis")  # private: not the shared server
    try:
        users = {}
        for owner in ("frank", "grace"):
            folder = _folder(tmp_path, owner)
            env = clean_environ(f"two-{owner}", folder / "state")  # the state folders differ
            users[owner] = (
                folder,
                {**env, "REDIS_URL": server.url, "AGENTLEDGER_PREFIX": "shared"},
            )
        for round_ in range(ROUNDS):
            runs = {
                owner: subprocess.Popen(
                    [*AGENTLEDGER, "run", "--json", "spec.yaml"],
                    cwd=folder,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )  # fmt: skip
                for owner, (folder, env) in users.items()
            }
            done = {
                owner: p.communicate(timeout=COMMAND_TIMEOUT_S * 2) for owner, p in runs.items()
            }
            for owner, proc in runs.items():
                assert proc.returncode == 0, f"round {round_}, {owner}: {done[owner][1][-2000:]}"
                assert json.loads(done[owner][0].splitlines()[-1])["status"] == "completed"
        for owner, (folder, env) in users.items():
            created = [
                of_type(Cli(folder, env).events(run_id), "RunCreated")[0]
                for run_id in Cli(folder, env).runs()
            ]
            mine = local_name(str(folder / "state"))
            assert sum(c["publisher"] == mine for c in created) == ROUNDS, owner
            ran = [  # each run worked in its own copy of the workspace
                line for c in created if c["publisher"] == mine
                for line in (Path(c["workspace"]) / "ran.log").read_text().splitlines()
            ]  # fmt: skip
            assert {line.split()[1] for line in ran} == {owner} and len(ran) == ROUNDS * CALLS
    finally:
        server.stop()


@pytest.mark.slow
def test_status_says_when_no_worker_serves_a_live_runs_queue_and_tool_set(
    tmp_path: Path, cli: Cli
) -> None:
    folder = _folder(tmp_path, "erin")
    (folder / "slow.yaml").write_text(
        SPEC.replace("    - tool_use: [{id: n0,", "    - delay_s: 60\n      tool_use: [{id: n0,", 1)
    )
    tools = ["--tools", "tools", "--tool-path", str(folder), "--queue", "erin"]
    workers = subprocess.Popen(
        [*AGENTLEDGER, "workers", *tools], cwd=folder, env=cli.env, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    intakes = []
    try:
        assert workers.stdout is not None and "workers up" in workers.stdout.readline()
        intakes.append(start_intake(cli))
        toolset = workers_toolset(cli, folder)
        submitted = cli("submit", "--as", cli.publisher(), "--queue", "erin", folder / "slow.yaml")
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        _until(cli, run_id, lambda s: s["status"] == "requesting_model")
        assert "waiting_for" not in json.loads(cli("status", "--json", run_id).stdout)
    finally:
        workers.terminate()
        workers.wait(timeout=30)
        stop_workers(intakes)

    said = _until(cli, run_id, lambda s: "waiting_for" in s)
    assert said["status"] == "requesting_model"
    assert said["waiting_for"] == f"no worker serves queue 'erin' with tool set {toolset}"
    assert (
        f"waiting: no worker serves queue 'erin' with tool set {toolset}"
        in cli("status", run_id).stdout
    )


def workers_toolset(cli: Cli, folder: Path) -> str:
    return cli("toolset", "--tools", "tools", "--tool-path", str(folder)).stdout.strip()


def _until(cli: Cli, run_id: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        done = cli("status", "--json", run_id)
        if done.stdout.strip():
            summary: dict[str, Any] = json.loads(done.stdout)
            if check(summary):
                return summary
        assert time.monotonic() < deadline, f"status never got there: {done.stdout} {done.stderr}"
        time.sleep(0.2)
