"""Cancel ends everything a run started: a command check still running when its
run is cancelled gets SIGTERM, and SIGKILL once the run's `cancel_grace_s` has
passed, and the stop is recorded (`AcceptanceCheckStopped`, with the signals);
no check starts once the run is cancelled or out of wall clock; a check is held
to the operator's maximum; a cancelled tool call starts no more commands.
Commands run unsandboxed here (the unit tier's settings); the e2e tier runs them
in the sandbox."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest
from handlerkit import Unit, new_unit, spec

from agentledger.events import controls
from agentledger.events.commands import RunAcceptance
from agentledger.events.status import RunStatus
from agentledger.events.types import AcceptanceChecked, AcceptanceCheckStopped
from agentledger.schemas.spec import Policies, RunSpec
from agentledger.services.adapters.tools.context import ToolContext
from agentledger.services.adapters.tools.registry import ToolCancelled
from agentledger.services.adapters.tools.sandbox import SandboxPolicy
from agentledger.services.handlers.engine import Decided

DONE = {"end_turn": "done"}
GRACE_S = 0.5
STUBBORN = "echo $$ > started; trap '' TERM; sleep 30"  # its sleep ignores SIGTERM too
OBEDIENT = "echo $$ > started; exec sleep 30"


def with_grace(run_spec: RunSpec) -> RunSpec:
    return run_spec.model_copy(update={"policies": Policies(cancel_grace_s=GRACE_S)})


def accepting(unit: Unit, command: str, **budgets: object) -> None:
    unit.create("run-a", with_grace(spec(DONE, acceptance=[{"command": command}], **budgets)))
    unit.drive(until=lambda u: u.state("run-a").status is RunStatus.ACCEPTING)
    unit.take()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def cancel_while_it_runs(unit: Unit) -> tuple[AcceptanceCheckStopped, int, float]:
    running = unit.start(RunAcceptance("run-a"))
    started = unit.workspace / "started"
    unit.wait_for(lambda: started.exists() and started.read_text().strip() != "", why="it runs")
    pid = int(started.read_text())
    unit.app.engine.take(
        "run-a", Decided("intake", lambda s: controls.cancel(s, by="alice", source="test"))
    )
    asked = time.monotonic()
    unit.clock.advance(1.0)  # the check's watch on its run looks again
    running.join()
    took = time.monotonic() - asked
    stopped = unit.memory.read("run-a")[-1].data
    assert isinstance(stopped, AcceptanceCheckStopped), unit.types("run-a")
    return stopped, pid, took


@pytest.fixture
def unit(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws")


def test_a_check_that_ignores_sigterm_is_killed_after_the_grace_and_both_are_recorded(
    unit: Unit,
) -> None:
    accepting(unit, STUBBORN)
    stopped, pid, took = cancel_while_it_runs(unit)

    assert stopped.signals == ("SIGTERM", "SIGKILL")
    assert "SIGKILL" in stopped.detail and stopped.index == 0
    assert not alive(pid)
    assert GRACE_S <= took < GRACE_S + 5  # waited out the grace, no more than a bounded while
    assert unit.state("run-a").status is RunStatus.CANCELLED
    assert unit.types("run-a")[-3:] == [
        "RunCancelRequested",
        "RunCancelled",
        "AcceptanceCheckStopped",
    ]


def test_a_check_that_stops_on_sigterm_gets_no_sigkill(unit: Unit) -> None:
    accepting(unit, OBEDIENT)
    stopped, pid, took = cancel_while_it_runs(unit)

    assert stopped.signals == ("SIGTERM",)
    assert not alive(pid)
    assert took < GRACE_S + 5


def test_no_check_starts_once_the_runs_wall_clock_is_over_and_the_run_times_out(
    unit: Unit,
) -> None:
    accepting(unit, "touch ran", max_wall_clock_s=100)
    unit.clock.advance(200)

    unit.deliver(RunAcceptance("run-a"))

    assert unit.state("run-a").status is RunStatus.TIMEOUT
    assert not (unit.workspace / "ran").exists()


def test_a_check_is_held_to_the_operators_maximum(unit: Unit) -> None:
    unit.app = dataclasses.replace(
        unit.app, settings=unit.app.settings.with_(max_command_timeout_s=0.3)
    )
    accepting(unit, "sleep 5")

    began = time.monotonic()
    unit.deliver(RunAcceptance("run-a"))

    assert time.monotonic() - began < 4
    checked = [e.data for e in unit.memory.read("run-a") if isinstance(e.data, AcceptanceChecked)]
    assert checked[0].evidence["reason"] == (
        "no exit within 0.3s (the operator's maximum; the check asked 300s)"
    )


def test_a_cancelled_tool_call_starts_no_more_commands(tmp_path: Path) -> None:
    ctx = ToolContext("run-a", "c1", str(tmp_path), "p", "t", sandbox=SandboxPolicy(enabled=False))
    ctx.cancelled.set()
    with pytest.raises(ToolCancelled):
        ctx.run(["touch", str(tmp_path / "ran")])
    assert not (tmp_path / "ran").exists()
