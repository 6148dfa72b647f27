"""Stopping the CLI: SIGINT or SIGTERM of any command exits 130 with no
traceback. `agentledger run` first asks its run to cancel and waits for it to
end `cancelled` (the log is never left mid-step by the CLI stopping); a second
signal stops at once; worker processes it started never outlive it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2ekit import AGENTLEDGER, Cli, copy_example, of_type

DEAF_TOOLS = '''
import time
from agentledger import tool

@tool(read_only=True, timeout_s=120)
def deaf_sleep(seconds: float) -> dict:
    """Sleeps, never looking at its cancel flag."""
    time.sleep(seconds)
    return {"slept": seconds}
'''


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start(cli: Cli, procs: list[subprocess.Popen[str]], *args: str | Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [*AGENTLEDGER, *map(str, args)], cwd=cli.cwd, env=cli.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    procs.append(proc)
    return proc


def the_run(cli: Cli, timeout_s: float = 30) -> str:
    """The one run of this CLI's prefix, once it exists."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = cli.runs()
        if runs:
            return runs[0]
        time.sleep(0.1)
    raise AssertionError("no run was created")


def wait_for(cli: Cli, run_id: str, event_type: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while event_type not in [e["type"] for e in cli.events(run_id)]:
        assert time.monotonic() < deadline, f"no {event_type}"
        time.sleep(0.1)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


def test_an_interrupted_run_cancels_its_run_and_exits_130(
    cli: Cli, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    steering = copy_example("steering", tmp_path)
    proc = start(cli, started, "run", "--json", steering / "cancel_cooperative.yaml")
    run_id = the_run(cli)
    wait_for(cli, run_id, "ToolCallStarted")

    proc.send_signal(signal.SIGINT)  # SIGTERM: test_worker_processes_of_run_never_outlive_it
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted: cancelling" in err
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["status"], summary["interrupted"]) == ("cancelled", True)
    events = cli.events(run_id)
    assert events[-1]["type"] == "RunCancelled"
    assert of_type(events, "ToolCallCancelled"), "the running tool was stopped, not abandoned"


def test_a_second_signal_stops_at_once_and_names_the_command_that_goes_on(
    cli: Cli, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    (tmp_path / "deaf_tools.py").write_text(DEAF_TOOLS)
    spec = {
        "task": "sleep through a cancel", "tools": ["deaf_tools"],
        "principal": {"id": "alice", "tenant": "t1"},
        "policies": {"cancel_grace_s": 60},
        "model": {"scripted": [{"tool_use": [{"id": "d1", "name": "deaf_sleep", "input": {"seconds": 60}}]}, {"end_turn": "slept"}]},
    }  # fmt: skip
    (tmp_path / "deaf.yaml").write_text(yaml.safe_dump(spec))
    proc = start(cli, started, "run", tmp_path / "deaf.yaml")
    run_id = the_run(cli)
    wait_for(cli, run_id, "ToolCallStarted")

    proc.send_signal(signal.SIGINT)
    wait_for(cli, run_id, "RunCancelRequested")
    asked = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)

    assert proc.returncode == 130 and "Traceback" not in err, err
    assert time.monotonic() - asked < 20, "it waited for the 60 s grace"
    assert "stopped at once" in err and "it was asked to cancel: it ends cancelled" in err
    assert cli.events(run_id)[-1]["type"] == "RunCancelRequested"  # nothing half-written
    # the command it says goes on with the run: the attach (test_cli_attach runs it)
    (hint,) = [line for line in err.splitlines() if "stopped at once" in line]
    assert shlex.split(hint.split("`")[1]) == ["agentledger", "run", "--attach", run_id]


def test_worker_processes_of_run_never_outlive_it(
    cli: Cli, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    steering = copy_example("steering", tmp_path)
    proc = start(cli, started, "run", "--processes", "2", steering / "cancel_cooperative.yaml")
    run_id = the_run(cli)
    wait_for(cli, run_id, "ToolCallStarted")
    workers = children_of(proc.pid)
    assert len(workers) == 2

    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)

    assert proc.returncode == 130
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, f"worker processes left behind: {workers}"
        time.sleep(0.1)
    assert cli.events(run_id)[-1]["type"] == "RunCancelled"


def test_worker_processes_die_with_a_killed_run(
    cli: Cli, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    steering = copy_example("steering", tmp_path)
    proc = start(cli, started, "run", "--processes", "2", steering / "cancel_cooperative.yaml")
    run_id = the_run(cli)
    wait_for(cli, run_id, "ToolCallStarted")
    workers = children_of(proc.pid)

    proc.kill()  # SIGKILL: no handler runs; the kernel tells the children
    proc.wait()

    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, f"orphaned worker processes: {workers}"
        time.sleep(0.1)


def test_an_interrupted_tail_exits_130_without_a_traceback(
    cli: Cli, started: list[subprocess.Popen[str]]
) -> None:
    proc = start(cli, started, "tail", "--follow")
    time.sleep(1.5)  # it is following (or still starting: either way it must stop cleanly)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "Traceback" not in err
