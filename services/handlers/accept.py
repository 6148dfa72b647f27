"""The acceptance pool: claim the run's acceptance, run every declared check
itself, record each result with its evidence, then the outcome."""

from __future__ import annotations

import subprocess

from events.acceptance_step import CheckResult, contains, record_acceptance, start_acceptance
from events.state import RunState
from events.tool_step import Errored, Succeeded, TimedOut
from events.types import AcceptanceStarted, Event
from schemas.spec import CommandCheck, ToolCheck
from services.app import App
from services.steps import run_step
from services.tool_runner import run_tool
from services.tools import ToolContext

SOURCE = "accept"
TAIL = 2000


def handle_run_acceptance(app: App, run_id: str) -> None:
    def claim(s: RunState) -> list[Event]:
        return start_acceptance(s, now=app.clock.now(), lease_s=app.settings.acceptance_lease_s)

    step = run_step(app.store, app.clock, run_id, claim, source=SOURCE)
    started = step.first(AcceptanceStarted)
    if started is None:
        return
    state = step.state
    app.load_tools(state)
    results = [_run_check(app, state, check) for check in state.spec.acceptance]
    run_step(
        app.store,
        app.clock,
        run_id,
        lambda s: record_acceptance(s, attempt=started.attempt, results=results),
        source=SOURCE,
    )


def _run_check(app: App, s: RunState, check: CommandCheck | ToolCheck) -> CheckResult:
    match check:
        case CommandCheck():
            return _command(app, s, check)
        case ToolCheck():
            return _tool(app, s, check)


def _command(app: App, s: RunState, check: CommandCheck) -> CheckResult:
    what = f"command {check.command!r} exits 0"
    try:
        done = subprocess.run(
            check.command,
            shell=True,
            cwd=s.workspace or s.base_dir,
            capture_output=True,
            text=True,
            timeout=check.timeout_s,
        )
    except subprocess.TimeoutExpired:
        evidence = {"reason": f"no exit within {check.timeout_s:g}s"}
        return CheckResult(what, False, evidence, app.clock.now())
    evidence = {
        "exit_code": done.returncode,
        "stdout_tail": done.stdout[-TAIL:],
        "stderr_tail": done.stderr[-TAIL:],
        "cwd": s.workspace or s.base_dir,
    }
    if done.returncode != 0:
        evidence["reason"] = f"exit code {done.returncode}"
    return CheckResult(what, done.returncode == 0, evidence, app.clock.now())


def _tool(app: App, s: RunState, check: ToolCheck) -> CheckResult:
    what = f"tool {check.tool}({_args(check.input)}) returns {check.expect!r}"
    registered = app.registry.get(check.tool)
    if registered is None or not registered.spec.read_only:
        reason = "no such tool" if registered is None else "the tool is not read-only"
        return CheckResult(what, False, {"reason": reason}, app.clock.now())
    ctx = ToolContext(
        run_id=s.run_id,
        call_id=f"acceptance:{check.tool}",
        workspace=s.workspace,
        principal_id=s.spec.principal.id,
        tenant=s.spec.principal.tenant,
    )
    outcome = run_tool(registered, check.input, ctx, timeout_s=registered.spec.timeout_s)
    evidence: dict[str, object] = {"tool": check.tool, "input": check.input, "expect": check.expect}
    match outcome:
        case Succeeded(output):
            evidence["output"] = output
            passed = contains(check.expect, output)
            if not passed:
                evidence["reason"] = f"got {output!r}"
        case Errored(error):
            passed = False
            evidence["reason"] = f"{error.code}: {error.message}"
        case TimedOut(after_s):
            passed = False
            evidence["reason"] = f"no result within {after_s:g}s"
    return CheckResult(what, passed, evidence, app.clock.now())


def _args(args: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())
