"""Checks of a run spec beyond its schema, refused before anything is appended,
each naming the field, all problems at once. With the tool set in hand (the
CLI loads the spec's modules on the user's machine) every tool the spec names
is checked against it; the intake, which never imports a module a message
names, checks what a registered tool set's manifest tells."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from events.pricing import price_of
from schemas.errors import InvalidSpec, SpecProblem
from schemas.spec import (
    AnthropicModel,
    FileCheck,
    PythonCheck,
    ReplayModel,
    RunSpec,
    ScriptedModel,
    ToolCheck,
)
from services.adapters.tools.toolset import ToolSet
from services.handlers.linear_regex import pattern_problem


def tool_paths(spec: RunSpec, base_dir: str | None) -> list[str]:
    paths = [p for p in (base_dir, *spec.tool_path) if p]
    return [os.path.join(base_dir, p) if base_dir and not os.path.isabs(p) else p for p in paths]


def check_spec(
    spec: RunSpec,
    base_dir: str | None,
    *,
    toolset: ToolSet | None = None,
    manifest: Mapping[str, Any] | None = None,
) -> None:
    problems = spec_problems(spec, base_dir, toolset=toolset, manifest=manifest)
    if problems:
        raise InvalidSpec.of(problems)


def spec_problems(
    spec: RunSpec,
    base_dir: str | None,
    *,
    toolset: ToolSet | None = None,
    manifest: Mapping[str, Any] | None = None,
) -> list[SpecProblem]:
    tools = _tools(toolset, manifest)
    problems = _tool_problems(spec, tools, toolset) if tools is not None else []
    problems += _pattern_problems(spec)
    if isinstance(spec.model, ScriptedModel):
        problems += _script_problems(spec.model, tools)
    if isinstance(spec.model, AnthropicModel) and spec.model.anthropic.temperature is not None:
        reason = "the Messages API version the anthropic SDK sends refuses sampling parameters"
        problems.append(SpecProblem("model.anthropic.temperature", reason))
    # a replay costs what the recorded replies cost, priced by their recorded model ids
    if spec.budgets.max_cost_usd is not None and not isinstance(spec.model, ReplayModel):
        model = spec.model.anthropic.model if isinstance(spec.model, AnthropicModel) else "scripted"
        if price_of(model, spec.budgets.prices) is None:
            reason = f"a cost budget needs a price for model {model!r}"
            problems.append(SpecProblem("budgets.prices", reason))
    if spec.workspace and base_dir:
        ws = os.path.join(base_dir, spec.workspace)
        if not os.path.isdir(ws):
            problems.append(SpecProblem("workspace", f"{ws!r} is not a folder"))
    return problems


def _tools(toolset: ToolSet | None, manifest: Mapping[str, Any] | None) -> dict[str, bool] | None:
    """name -> read-only, of the tools the run will be offered (None: not known here)."""
    if toolset is not None:
        return {t.spec.name: t.spec.read_only for t in toolset.tools.values()}
    if manifest is not None:
        return {t["name"]: bool(t["read_only"]) for t in manifest.get("tools", [])}
    return None


def _tool_problems(
    spec: RunSpec, tools: dict[str, bool], toolset: ToolSet | None
) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    modules = toolset.modules if toolset is not None else tuple(spec.tools)
    for i, check in enumerate(spec.acceptance):
        if isinstance(check, ToolCheck):
            if check.tool not in tools:
                reason = f"no tool {check.tool!r} in {list(spec.tools)}"
                problems.append(SpecProblem(f"acceptance.{i}.tool", reason))
                continue
            if not tools[check.tool]:
                problems.append(SpecProblem(f"acceptance.{i}.tool", f"{check.tool!r} is not read-only"))
            t = toolset.get(check.tool) if toolset is not None else None
            if t is not None and (errors := t.check(check.input)[1]):
                reason = "; ".join(f"{e.loc}: {e.msg}" for e in errors)
                problems.append(SpecProblem(f"acceptance.{i}.input", reason))
        if isinstance(check, PythonCheck):
            module = check.python.split(":")[0]
            if not any(module == m or module.startswith(f"{m}.") for m in modules):
                reason = (
                    f"{module!r} is not one of the run's tool modules {list(modules)}: "
                    "workers import only their tool set"
                )
                problems.append(SpecProblem(f"acceptance.{i}.python", reason))
    return problems


def _pattern_problems(spec: RunSpec) -> list[SpecProblem]:
    """A file check's regex must compile under RE2 (linear time): found now, not at
    acceptance time."""
    return [
        SpecProblem(f"acceptance.{i}.matches", why)
        for i, check in enumerate(spec.acceptance)
        if isinstance(check, FileCheck)
        and check.matches is not None
        and (why := pattern_problem(check.matches)) is not None
    ]


def _script_problems(model: ScriptedModel, tools: dict[str, bool] | None) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    seen: set[str] = set()
    for t, turn in enumerate(model.scripted):
        for c, call in enumerate(turn.tool_use or ()):
            where = f"model.scripted.{t}.tool_use.{c}"
            if call.id in seen:
                problems.append(SpecProblem(f"{where}.id", f"{call.id!r} is used twice"))
            seen.add(call.id)
            if tools is not None and call.name not in tools:
                known = ", ".join(sorted(tools)) or "none"
                reason = f"the run has no tool {call.name!r} (tools: {known})"
                problems.append(SpecProblem(f"{where}.name", reason))
    return problems
