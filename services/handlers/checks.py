"""The acceptance checks, run by the acceptance worker itself. Each returns
whether it passed, the evidence it saw, and the resources that evidence
depends on ("*": any write of the run)."""

from __future__ import annotations

import importlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from events.acceptance_step import contains
from events.state import RunState
from events.tool_step import Succeeded
from schemas.spec import CommandCheck, FileCheck, PythonCheck, ToolCheck
from services.adapters.tools.process import run_command
from services.adapters.tools.registry import ToolContext
from services.adapters.tools.runner import run_tool
from services.adapters.tools.sandbox import SandboxUnavailable, policy_for
from services.handlers import linear_regex
from services.handlers.app import App

TAIL = 2000
AnyCheck = CommandCheck | ToolCheck | FileCheck | PythonCheck


@dataclass(frozen=True)
class Verdict:
    what: str
    passed: bool
    evidence: dict[str, Any]
    depends_on: tuple[str, ...] = ("*",)


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
                return Verdict(f"file {check.file!r} matches /{check.matches}/", False, {"reason": str(exc)})
        case PythonCheck():
            return _python(app, s, check)


def _command(app: App, s: RunState, check: CommandCheck) -> Verdict:
    """The command runs in the sandbox, like a tool's: the workspace read-write,
    no network, the sandbox's limits, and `check.timeout_s`."""
    what = f"command {check.command!r} exits 0"
    workspace = s.workspace or s.base_dir
    cwd = workspace or "/tmp"
    try:
        done = run_command(
            ["/bin/sh", "-c", check.command],
            policy=policy_for(app.settings),
            workspace=workspace,
            cwd=cwd,
            timeout_s=check.timeout_s,
        )
    except subprocess.TimeoutExpired:
        return Verdict(what, False, {"reason": f"no exit within {check.timeout_s:g}s", "cwd": cwd})
    except SandboxUnavailable as exc:
        return Verdict(what, False, {"reason": str(exc), "cwd": cwd})
    evidence: dict[str, Any] = {
        "exit_code": done.returncode,
        "stdout_tail": done.stdout[-TAIL:],
        "stderr_tail": done.stderr[-TAIL:],
        "cwd": cwd,
    }
    if done.limit is not None:
        evidence["reason"] = f"stopped at {done.limit}"
    elif done.returncode != 0:
        evidence["reason"] = f"exit code {done.returncode}"
    return Verdict(what, done.returncode == 0, evidence)


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
        sandbox=policy_for(app.settings),
    )
    parsed, _ = registered.check(check.input)
    reads, _ = registered.resources(parsed, s.workspace) if parsed else ([], [])
    outcome = run_tool(registered, check.input, ctx, timeout_s=registered.spec.timeout_s)
    evidence: dict[str, Any] = {"tool": check.tool, "input": check.input, "expect": check.expect}
    if isinstance(outcome, Succeeded):
        evidence["output"] = outcome.output
        passed = contains(check.expect, outcome.output)
        if not passed:
            evidence["reason"] = f"got {outcome.output!r}"
        return Verdict(what, passed, evidence, tuple(reads) or ("*",))
    evidence["reason"] = str(outcome)
    return Verdict(what, False, evidence)


def _file(s: RunState, check: FileCheck) -> Verdict:
    root = Path(s.workspace or s.base_dir or ".").resolve()
    path = (root / check.file).resolve()
    what = (
        f"file {check.file!r}"
        + (f" contains {check.contains!r}" if check.contains else "")
        + (f" matches /{check.matches}/" if check.matches else "")
    )
    depends = (f"file:{check.file}", f"file:{path}")
    if not path.is_relative_to(root) or not path.is_file():
        return Verdict(
            what, False, {"reason": f"{check.file!r} is not a file in the workspace"}, depends
        )
    text = path.read_text(errors="replace")
    found = (check.contains is None or check.contains in text) and (
        check.matches is None or linear_regex.search(check.matches, text)
    )
    evidence: dict[str, Any] = {"path": str(path), "size": len(text), "head": text[:TAIL]}
    if not found:
        evidence["reason"] = "not found in the file"
    return Verdict(what, found, evidence, depends)


def _python(app: App, s: RunState, check: PythonCheck) -> Verdict:
    module_name, func_name = check.python.split(":")
    what = f"python {check.python}(workspace) is true"
    if not in_toolset(module_name, app.toolset.modules):
        # a worker imports only the code it was started with, never what a spec names
        reason = f"{module_name!r} is not a module of this worker's tool set {list(app.toolset.modules)}"
        return Verdict(what, False, {"reason": reason})
    try:
        result = getattr(importlib.import_module(module_name), func_name)(s.workspace)
    except Exception as exc:  # the check's own code failed: a failed check, with why
        return Verdict(what, False, {"reason": f"{type(exc).__name__}: {exc}"})
    passed, evidence = result if isinstance(result, tuple) else (result, {})
    evidence = {"returned": repr(result)[:TAIL], **(evidence or {})}
    if not passed:
        evidence.setdefault("reason", "returned false")
    return Verdict(what, bool(passed), evidence)


def in_toolset(module: str, modules: tuple[str, ...]) -> bool:
    """A python check may name a tool set module, or a module inside a tool set package."""
    return any(module == m or module.startswith(f"{m}.") for m in modules)
