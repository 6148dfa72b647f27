"""The acceptance checks, run by the acceptance worker itself. Each returns
whether it passed, the evidence it saw, and the resources that evidence
depends on ("*": any write of the run). A command or tool check runs within
its timeout held to the operator's maximum and to the run's wall clock
(`agentledger.events.acceptance_step.check_timeout_s`), watching its run: once the run
stops (cancelled, timed out) the check is stopped — SIGTERM, then SIGKILL after
the run's `cancel_grace_s` — and says so (`Verdict.stopped`) instead of a verdict."""

from __future__ import annotations

import contextlib
import importlib
import posixpath
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, assert_never

from agentledger.events.acceptance_step import check_timeout_s, contains
from agentledger.events.frozen import replace
from agentledger.events.state import RunState
from agentledger.events.tool_step import Errored, Lost, StillRunning, Stopped, Succeeded, TimedOut
from agentledger.schemas.spec import CommandCheck, FileCheck, PythonCheck, ToolCheck
from agentledger.services.adapters.tools.context import ToolFailure
from agentledger.services.adapters.tools.process import run_command
from agentledger.services.adapters.tools.registry import REGISTRY, ToolContext, not_a_check
from agentledger.services.adapters.tools.runner import run_tool
from agentledger.services.adapters.tools.sandbox import SandboxUnavailable
from agentledger.services.adapters.tools.stopping import StopReport, run_stoppable
from agentledger.services.adapters.tools.workspace_files import WorkspaceFiles, file_resource
from agentledger.services.handlers import linear_regex
from agentledger.services.handlers.app import App
from agentledger.services.handlers.execution import RunWatch
from agentledger.services.handlers.findings import max_timeout_s

TAIL = 2000
FILE_CHECK_BYTES = 1_000_000  # of a file check's file, read and searched
AnyCheck = CommandCheck | ToolCheck | FileCheck | PythonCheck


@dataclass(frozen=True)
class Verdict:
    what: str
    passed: bool
    evidence: dict[str, Any]
    depends_on: tuple[str, ...] = ("*",)
    stopped: StopReport | None = None  # stopped because the run stopped: no verdict


def run_check(app: App, s: RunState, check: AnyCheck) -> Verdict:
    match check:
        case CommandCheck():
            return _command(app, s, check)
        case ToolCheck():
            return _tool(app, s, check)
        case FileCheck():
            try:
                return _file(s, check)
            except linear_regex.BadPattern as exc:  # a run recorded before patterns were checked
                return Verdict(
                    f"file {check.file!r} matches /{check.matches}/", False, {"reason": str(exc)}
                )
        case PythonCheck():
            return _python(app, s, check)
        case _:
            assert_never(check)


def _command(app: App, s: RunState, check: CommandCheck) -> Verdict:
    """The command runs in the sandbox, like a tool's: the workspace read-write
    (a run with none: a fresh empty folder, removed afterwards), no network, the
    sandbox's limits, and `check.timeout_s` held to the operator's maximum and the
    run's wall clock; stopped with the run."""
    if s.workspace is None:  # never base_dir: an empty folder of its own, removed afterwards
        with tempfile.TemporaryDirectory(prefix="agentledger-check-") as empty:
            return _command(app, replace(s, workspace=empty), check)
    what = f"command {check.command!r} exits 0"
    workspace = s.workspace
    cwd = workspace
    most = app.settings.max_command_timeout_s
    timeout = check_timeout_s(s, check.timeout_s, now=app.clock.now(), most_s=most)
    if timeout <= 0:
        return Verdict(
            what, False, {"reason": "the run's wall clock ended before it ran", "cwd": cwd}
        )
    try:
        done = run_stoppable(
            lambda started: run_command(
                ["/bin/sh", "-c", check.command],
                policy=app.sandbox,
                workspace=workspace,
                cwd=cwd,
                timeout_s=timeout,
                started=started,
            ),
            stop_requested=RunWatch(app, s).stop_requested,
            grace_s=s.spec.policies.cancel_grace_s,
            clock=app.clock.now,
        )
    except subprocess.TimeoutExpired:
        reason = _no_exit(timeout, check.timeout_s, most)
        return Verdict(what, False, {"reason": reason, "cwd": cwd})
    except SandboxUnavailable as exc:  # the sandbox's failure: the command never ran
        reason = f"not run: the sandbox failed, not the command: {exc}"
        return Verdict(what, False, {"reason": reason, "sandbox_failed": True, "cwd": cwd})
    if isinstance(done, StopReport):
        return Verdict(what, False, {"reason": done.detail, "cwd": cwd}, stopped=done)
    evidence: dict[str, Any] = {
        "exit_code": done.returncode,
        "stdout_tail": done.stdout[-TAIL:],
        "stderr_tail": done.stderr[-TAIL:],
        "cwd": cwd,
    }
    if done.limit is not None:
        evidence["reason"] = f"stopped at {done.limit}"
    elif done.returncode != 0:
        evidence["reason"] = f"exit {done.returncode}"
    return Verdict(what, done.returncode == 0, evidence)


def _no_exit(timeout: float, own: float, most: float) -> str:
    """Why a check ran out of time: its own timeout, the maximum, or the run's wall clock."""
    if timeout >= own:
        return f"no exit within {own:g}s"
    if timeout >= most:
        return f"no exit within {timeout:g}s (the operator's maximum; the check asked {own:g}s)"
    return f"no exit within {timeout:g}s: the run's wall clock ended"


def _tool(app: App, s: RunState, check: ToolCheck) -> Verdict:
    args = ", ".join(f"{k}={v!r}" for k, v in check.input.items())
    what = f"tool {check.tool}({args}) returns {check.expect!r}"
    registered = app.toolset.get(check.tool)
    if registered is None or not registered.spec.read_only:
        reason = "no such tool" if registered is None else "the tool is not read-only"
        return Verdict(what, False, {"reason": reason})
    ctx = ToolContext(
        s.run_id,
        f"acceptance:{check.tool}",
        s.workspace,
        s.spec.principal.id,
        s.spec.principal.tenant,
        sandbox=app.sandbox,
    )
    parsed, _ = registered.check(check.input)
    reads, _ = registered.resources(parsed, s.workspace) if parsed else ([], [])
    most = max_timeout_s(registered, app.settings)
    timeout = check_timeout_s(s, registered.spec.timeout_s, now=app.clock.now(), most_s=most)
    evidence: dict[str, Any] = {"tool": check.tool, "input": check.input, "expect": check.expect}
    if timeout <= 0:
        return Verdict(
            what, False, {**evidence, "reason": "the run's wall clock ended before it ran"}
        )
    grace = s.spec.policies.cancel_grace_s
    outcome = run_tool(
        registered, check.input, ctx, timeout_s=timeout,
        stop_requested=RunWatch(app, s).stop_requested, grace_s=grace,
    )  # fmt: skip
    if isinstance(outcome, Stopped | StillRunning):
        stop = _tool_stopped(outcome, grace, app.clock.now())
        return Verdict(what, False, {**evidence, "reason": stop.detail}, stopped=stop)
    if isinstance(outcome, Succeeded):
        evidence["output"] = outcome.output
        passed = contains(check.expect, outcome.output)
        if not passed:
            evidence["reason"] = f"got {outcome.output!r}"
        return Verdict(what, passed, evidence, tuple(reads) or ("*",))
    evidence["reason"] = _tool_failed(outcome)
    return Verdict(what, False, evidence)


def _tool_failed(outcome: Errored | TimedOut | Lost) -> str:
    """What came back from a tool check that returned no output."""
    match outcome:
        case Errored(error):
            return f"the tool failed: {error.code}: {error.message}"
        case TimedOut(after_s):
            return f"no result within {after_s:g}s"
        case Lost(reason):
            return f"no result: {reason}"
        case _:
            assert_never(outcome)


def _tool_stopped(outcome: Stopped | StillRunning, grace_s: float, now: float) -> StopReport:
    """A tool check stopped with its run, as a command check's stop is told."""
    if isinstance(outcome, StillRunning):
        detail = f"SIGTERM, then SIGKILL after {grace_s:g}s; its thread is still running"
        return StopReport(outcome.requested_at, now, ("SIGTERM", "SIGKILL"), detail)
    if outcome.killed:
        return StopReport(outcome.requested_at, now, ("SIGTERM", "SIGKILL"), outcome.detail)
    detail = f"cancel flag and SIGTERM; it stopped within the grace of {grace_s:g}s"
    return StopReport(outcome.requested_at, now, ("SIGTERM",), detail)


def _file(s: RunState, check: FileCheck) -> Verdict:
    what = (
        f"file {check.file!r}"
        + (f" contains {check.contains!r}" if check.contains else "")
        + (f" matches /{check.matches}/" if check.matches else "")
    )
    depends = _file_resources(s.workspace, check.file)
    read = read_workspace_file(s.workspace, check.file)
    if isinstance(read, str):
        return Verdict(what, False, {"reason": read}, depends)
    path, text = read
    missing = _not_found(check, text)
    evidence: dict[str, Any] = {"path": path, "size": len(text), "head": text[:TAIL]}
    if missing:
        evidence["reason"] = f"{' and '.join(missing)} in its {len(text)} characters"
    return Verdict(what, not missing, evidence, depends)


def _not_found(check: FileCheck, text: str) -> list[str]:
    """What a file check looked for and did not find in the file's text."""
    missing = []
    if check.contains is not None and check.contains not in text:
        missing.append(f"{check.contains!r} not found")
    if check.matches is not None and not linear_regex.search(check.matches, text):
        missing.append(f"no match for /{check.matches}/")
    return missing


def _python(app: App, s: RunState, check: PythonCheck) -> Verdict:
    """Calls the function only if it is declared a check (`@check`) in a module of
    this worker's tool set: never a tool function raw, nor any other attribute."""
    module_name, func_name = check.python.split(":")
    what = f"python {check.python}(workspace) is true"
    if not in_toolset(module_name, app.toolset.modules):
        # a worker imports only the code it was started with, never what a spec names
        reason = (
            f"{module_name!r} is not a module of this worker's tool set {list(app.toolset.modules)}"
        )
        return Verdict(what, False, {"reason": reason})
    try:
        fn = getattr(importlib.import_module(module_name), func_name, None)
        if not REGISTRY.is_check(fn):
            return Verdict(what, False, {"reason": not_a_check(check.python)})
        assert fn is not None
        result = fn(s.workspace)
    except Exception as exc:  # noqa: BLE001 -- a user's check raising anything: a failed check, not a dead worker
        return Verdict(what, False, {"reason": f"{type(exc).__name__}: {exc}"})
    passed, evidence = result if isinstance(result, tuple) else (result, {})
    evidence = {"returned": repr(result)[:TAIL], **(evidence or {})}
    if not passed:
        evidence.setdefault("reason", "returned false")
    return Verdict(what, bool(passed), evidence)


def in_toolset(module: str, modules: tuple[str, ...]) -> bool:
    """A python check may name a tool set module, or a module inside a tool set package."""
    return any(module == m or module.startswith(f"{m}.") for m in modules)


def read_workspace_file(workspace: str | None, name: str) -> tuple[str, str] | str:
    """A file check's file, read through WorkspaceFiles (inside the workspace, no
    link out, regular files only): its path and text, or why it cannot be read."""
    missing = f"{name!r} is not a file in the workspace"
    if workspace is None:
        return f"{missing}: the run has none"
    files = WorkspaceFiles(workspace, max_read_bytes=FILE_CHECK_BYTES)
    try:
        read = files.read_text(name, errors="replace")
    except ToolFailure as exc:
        return missing if exc.code == "not_found" else f"{missing}: {exc.message}"
    return str(files.root / read.path), read.text


def _file_resources(workspace: str | None, name: str) -> tuple[str, ...]:
    """What a file check's evidence depends on: the file by every name a tool may give it."""
    names = [f"file:{name}"]
    with contextlib.suppress(ToolFailure):  # a name outside the workspace: read as nothing
        names.append(file_resource(name, workspace))
    if workspace is not None:
        names.append(f"file:{posixpath.normpath(posixpath.join(workspace, name))}")
    return tuple(dict.fromkeys(names))
