"""No input holds a worker, through the CLI with the real sandbox and Redis: a
timeout beyond the operator's maximum is refused when the spec is read; a check
never runs past its run's wall clock; cancel ends everything a run started (a
command check's or a tool's sandboxed `sleep` gets SIGTERM, then SIGKILL after
the grace, and no process of the run is left grace + 1 s after the cancel); and
one tenant's slow checks do not hold another tenant's run (each pool of the
process has its own threads, and a tenant its share of the acceptance pool).

The processes of a run are found from outside: every descendant of the workers
process, every process carrying its sandboxes' owner mark
(`agentledger.services.adapters.tools.pids.owner_mark`), and every process in their PID
namespaces."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2ekit import Cli, of_type, start_workers, stop_workers, types

from agentledger.services.adapters.tools.pids import MARK

TOOLS = '''
from agentledger import ToolContext, tool


@tool(read_only=True, timeout_s=500)
def nap(ctx: ToolContext) -> dict:
    """Sleeps in the sandbox, ignoring SIGTERM."""
    done = ctx.run(["sh", "-c", "trap '' TERM; sleep 100000"])
    return {"exit_code": done.returncode}
'''
STUBBORN = "trap '' TERM; sleep 100000"  # the sleep ignores SIGTERM too: only SIGKILL ends it
GRACE_S = 1.0
SETTLED_S = 60.0


def write_spec(folder: Path, name: str, **fields: Any) -> Path:
    spec = {
        "task": name, "tools": ["bounds_tools"],
        "principal": {"id": "p", "tenant": "t"},
        "model": {"scripted": [{"end_turn": "done"}]},
        **fields,
    }  # fmt: skip
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "bounds_tools.py").write_text(TOOLS)
    return tmp_path


@pytest.fixture
def workers(cli: Cli, folder: Path) -> Iterator[int]:
    """One `workers` process serving the bounds tools; its pid."""
    proc = start_workers(cli, tools=["bounds_tools"], tool_path=folder)
    yield proc.pid
    stop_workers([proc])


def submit(cli: Cli, spec: Path) -> str:
    done = cli("submit", "--as", cli.publisher(), spec)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def cancel(cli: Cli, run_id: str) -> None:
    done = cli("cancel", "--as", cli.publisher(), run_id, "enough")
    assert done.returncode == 0, done.stderr


# --- the processes of a run, from outside ------------------------------------------------


def _stat(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def sandbox_processes(worker: int) -> set[int]:
    """Live processes the workers process `worker` started: its descendants, those
    carrying its sandboxes' owner mark, and everything in their PID namespaces."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        stat = _stat(entry) if entry.isdigit() else None
        if stat is not None and stat[0] != "Z":
            parents[int(entry)] = int(stat[1])
    found = {pid for pid in parents if _descends(pid, worker, parents)}
    mark = f"{MARK}:{worker}:".encode()
    for pid in parents:
        try:
            if mark in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            continue
    host_ns, namespaces = _pid_ns(os.getpid()), {_pid_ns(p) for p in found} - {None}
    namespaces.discard(host_ns)
    found |= {pid for pid in parents if _pid_ns(pid) in namespaces}
    return found


def _descends(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    seen = 0
    while pid in parents and seen < 64:
        pid, seen = parents[pid], seen + 1
        if pid == ancestor:
            return True
    return False


def _pid_ns(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def wait_for_processes(worker: int, *, timeout_s: float = 30) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while not (found := sandbox_processes(worker)):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    return found


def gone_at(worker: int, *, timeout_s: float) -> float:
    """When (wall clock) no process the worker started was left."""
    deadline = time.monotonic() + timeout_s
    while left := sandbox_processes(worker):
        assert time.monotonic() < deadline, f"still running: {sorted(left)}"
        time.sleep(0.02)
    return time.time()


def requested_at(cli: Cli, run_id: str) -> float:
    events = cli.wait_events(run_id, lambda es: "RunCancelRequested" in types(es), 30)
    [asked] = [e for e in events if e["type"] == "RunCancelRequested"]
    return float(asked["at"])


# --- refused when read, and the wall clock -----------------------------------------------


def test_a_spec_asking_a_timeout_over_the_maximum_is_refused_naming_field_and_maximum(
    cli: Cli, folder: Path
) -> None:
    spec = write_spec(folder, "greedy", acceptance=[{"command": "sleep 1", "timeout_s": 1e9}])
    done = cli("run", spec)
    assert done.returncode == 2, done.stderr
    assert "acceptance.0.timeout_s" in done.stderr
    assert "maximum of 600 s (AGENTLEDGER_MAX_COMMAND_TIMEOUT_S)" in done.stderr


def test_the_intake_refuses_a_submitted_spec_asking_more_than_its_maximum(
    cli: Cli, folder: Path, workers: int
) -> None:
    spec = write_spec(folder, "greedy", acceptance=[{"command": "sleep 1", "timeout_s": 1e9}])
    run_id = submit(cli, spec)  # `submit` cannot know the deployment's maxima
    deadline = time.monotonic() + 30
    while "refused" not in (said := cli("status", run_id).stderr):
        assert time.monotonic() < deadline, said
        time.sleep(0.3)
    assert "acceptance.0.timeout_s: 1e+09 s is over this deployment's maximum of 600 s" in said


def test_a_check_never_runs_past_the_runs_wall_clock(cli: Cli, folder: Path) -> None:
    spec = write_spec(
        folder, "late", budgets={"max_wall_clock_s": 4},
        acceptance=[{"command": "sleep 100", "timeout_s": 300}],
    )  # fmt: skip
    began = time.monotonic()
    code, summary = cli.run_json(spec)

    assert (code, summary["status"]) == (4, "timeout")
    assert time.monotonic() - began < 60, "the check ran on past the wall clock"
    events = cli.events(summary["run_id"])
    checked = of_type(events, "AcceptanceChecked")
    stopped = of_type(events, "AcceptanceCheckStopped")
    # on a loaded machine the wall clock may end before acceptance starts: then no check ran
    assert checked or stopped or "AcceptanceStarted" not in types(events), types(events)
    if checked:  # the check's own timeout was what was left of the wall clock
        assert "the run's wall clock ended" in checked[0]["evidence"]["reason"]
    elif stopped[0][
        "signals"
    ]:  # the sweeper's look at the wall clock came first, and stopped the check
        assert stopped[0]["signals"][0] == "SIGTERM"
    else:  # the check's own end (the wall clock) and the sweeper's came together
        assert "the run's wall clock ended" in stopped[0]["detail"], stopped[0]
    timed_out = of_type(events, "RunTimedOut")[0]
    assert timed_out["elapsed_s"] < 4 + 10


# --- cancel ends everything a run started ------------------------------------------------


def test_a_cancelled_runs_command_check_gets_sigterm_then_sigkill_and_nothing_survives(
    cli: Cli, folder: Path, workers: int
) -> None:
    spec = write_spec(
        folder, "stubborn_check", policies={"cancel_grace_s": GRACE_S},
        acceptance=[{"command": STUBBORN, "timeout_s": 500}],
    )  # fmt: skip
    run_id = submit(cli, spec)
    wait_for_processes(workers)
    time.sleep(0.3)  # the shell has set its trap

    cancel(cli, run_id)
    gone = gone_at(workers, timeout_s=GRACE_S + 30)  # looked at from the cancel on
    asked = requested_at(cli, run_id)

    print(f"\nthe last process was gone {gone - asked:.2f}s after the cancel (grace {GRACE_S:g}s)")
    assert gone - asked <= GRACE_S + 1.0, f"processes left {gone - asked:.2f}s after the cancel"
    events = cli.wait_events(run_id, lambda es: "AcceptanceCheckStopped" in types(es), 30)
    [stopped] = of_type(events, "AcceptanceCheckStopped")
    assert stopped["signals"] == ["SIGTERM", "SIGKILL"]
    assert stopped["stopped_at"] - stopped["requested_at"] >= GRACE_S
    assert [e["type"] for e in events][-3:] == [
        "RunCancelRequested", "RunCancelled", "AcceptanceCheckStopped",
    ]  # fmt: skip


def test_a_cancelled_runs_tool_command_gets_sigterm_then_sigkill_and_nothing_survives(
    cli: Cli, folder: Path, workers: int
) -> None:
    spec = write_spec(
        folder, "stubborn_tool", policies={"cancel_grace_s": GRACE_S},
        model={"scripted": [{"tool_use": [{"id": "n1", "name": "nap", "input": {}}]}, {"end_turn": "done"}]},
    )  # fmt: skip
    run_id = submit(cli, spec)
    wait_for_processes(workers)
    time.sleep(0.3)

    cancel(cli, run_id)
    gone = gone_at(workers, timeout_s=GRACE_S + 30)  # looked at from the cancel on
    asked = requested_at(cli, run_id)

    print(f"\nthe last process was gone {gone - asked:.2f}s after the cancel (grace {GRACE_S:g}s)")
    assert gone - asked <= GRACE_S + 1.0, f"processes left {gone - asked:.2f}s after the cancel"
    events = cli.wait_events(run_id, lambda es: "RunCancelled" in types(es), 30)
    [killed] = of_type(events, "ToolCallForceTerminated")
    assert "SIGTERM" in killed["detail"] and "SIGKILL" in killed["detail"]


# --- no pool starves another ---------------------------------------------------------------


@pytest.mark.slow
def test_another_tenants_run_completes_while_four_hostile_checks_hold_their_share(
    cli: Cli, folder: Path
) -> None:
    # four threads in all, as many as the hostile runs: with one pool of shared threads
    # (before the budgets) the four checks took every one and the other run waited 500 s
    tight = dataclasses.replace(
        cli, env={**cli.env, "AGENTLEDGER_WORKER_THREADS": "4", "AGENTLEDGER_ACCEPT_THREADS": "2"}
    )
    proc = start_workers(tight, tools=["bounds_tools"], tool_path=folder)
    try:
        hostile_spec = write_spec(
            folder, "hostile", principal={"id": "h", "tenant": "hostile"},
            acceptance=[{"command": "sleep 1000", "timeout_s": 500}],
        )  # fmt: skip
        hostile = [submit(cli, hostile_spec) for _ in range(4)]
        for run_id in hostile:
            cli.wait_events(run_id, lambda es: "ModelResponded" in types(es), SETTLED_S)
        wait_for_processes(proc.pid)
        other_spec = write_spec(
            folder, "other", principal={"id": "o", "tenant": "other"},
            acceptance=[{"command": "true"}],
        )  # fmt: skip

        other = submit(cli, other_spec)
        events = cli.wait_events(other, lambda es: "RunCompleted" in types(es), SETTLED_S)

        took = events[-1]["at"] - events[0]["at"]
        print(f"\nthe other tenant's run: created to completed in {took:.2f}s")
        assert took < 30, f"{took:.1f}s: the hostile checks held it"
        for run_id in hostile:
            cancel(cli, run_id)
        gone_at(proc.pid, timeout_s=30)  # no sleep survives
        for run_id in hostile:
            status = json.loads(cli("status", run_id, "--json").stdout)["status"]
            assert status == "cancelled"
    finally:
        stop_workers([proc])
