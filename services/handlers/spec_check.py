"""Checks of a run spec beyond its schema, refused before anything is appended,
each naming the field, all problems at once. With the tool set in hand (the
CLI loads the spec's modules on the user's machine) every tool the spec names
is checked against it (a `python:` check must name a function declared with
`@check`); the intake, which never imports a module a message names, checks
what a registered tool set's manifest tells. Given the settings of the
deployment that will run it (`run`'s own, the intake's), a timeout the spec
asks for beyond the operator's maximum is refused too (`timeout_problems`); a
check's default timeout is never refused, only held to the maximum when it runs."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agentledger.events.flow_check import flow_problems, stage_specs
from agentledger.events.model_reach import reach_refusals
from agentledger.events.pricing import price_of
from agentledger.schemas.errors import InvalidSpec, SpecProblem
from agentledger.schemas.spec import (
    CommandCheck,
    FileCheck,
    PythonCheck,
    ReplayModel,
    RunSpec,
    ScriptedModel,
    ToolCheck,
)
from agentledger.services.adapters.tools.registry import (
    REGISTRY,
    ExternalTool,
    RegisteredTool,
    not_a_check,
)
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.handlers.linear_regex import pattern_problem
from agentledger.services.prices_file import operator_prices
from agentledger.services.pydantic_words import plain_reason, reworded
from agentledger.services.settings import Settings


def tool_paths(spec: RunSpec, base_dir: str | None) -> list[str]:
    paths = [p for p in (base_dir, *spec.tool_path) if p]
    return [os.path.join(base_dir, p) if base_dir and not os.path.isabs(p) else p for p in paths]


def check_spec(
    spec: RunSpec,
    base_dir: str | None,
    *,
    toolset: ToolSet | None = None,
    manifest: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
) -> None:
    problems = spec_problems(spec, base_dir, toolset=toolset, manifest=manifest, settings=settings)
    if problems:
        raise InvalidSpec.of(problems)


def spec_problems(
    spec: RunSpec,
    base_dir: str | None,
    *,
    toolset: ToolSet | None = None,
    manifest: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
) -> list[SpecProblem]:
    """`settings`: those of the deployment that will run the spec, when known here."""
    if spec.flow is not None:
        return _flow_problems(spec, base_dir, toolset=toolset, manifest=manifest, settings=settings)
    tools = _tools(toolset, manifest)
    problems = _tool_problems(spec, tools, toolset) if tools is not None else []
    if settings is not None:
        problems += timeout_problems(spec, settings)
    problems += _pattern_problems(spec)
    if isinstance(spec.model, ScriptedModel):
        problems += _script_problems(spec.model, tools)
    problems += [SpecProblem(where, reason) for where, reason in spec.model.problems()]
    if settings is not None:
        problems += endpoint_problems(spec, settings)
    # a replay costs what the recorded replies cost, priced by their recorded model ids
    if spec.budgets.max_cost_usd is not None and not isinstance(spec.model, ReplayModel):
        model = spec.model.model_id
        known = (
            {**operator_prices(settings), **spec.budgets.prices}
            if settings
            else spec.budgets.prices
        )
        if price_of(model, known) is None:
            reason = f"a cost budget needs a price for model {model!r}"
            problems.append(SpecProblem("budgets.prices", reason))
    if spec.workspace and base_dir:
        ws = os.path.join(base_dir, spec.workspace)
        if not os.path.isdir(ws):
            problems.append(SpecProblem("workspace", f"{ws!r} is not a folder"))
    return problems


def _flow_problems(
    spec: RunSpec,
    base_dir: str | None,
    *,
    toolset: ToolSet | None,
    manifest: Mapping[str, Any] | None,
    settings: Settings | None,
) -> list[SpecProblem]:
    """A flow's own problems, then each agent stage's as a run spec's (named by where
    the stage is written); a call stage's tool must be one the tool set registers."""
    problems = [SpecProblem(where, reason) for where, reason in flow_problems(spec)]
    for where, as_run in stage_specs(spec):
        found = spec_problems(
            as_run, base_dir, toolset=toolset, manifest=manifest, settings=settings
        )
        problems += [SpecProblem(f"{where}.{p.field}", p.reason) for p in found]
    tools = _tools(toolset, manifest)
    for i, stage in enumerate(spec.flow or ()):
        if stage.call is not None and tools is not None and stage.call.tool not in tools:
            reason = f"no tool {stage.call.tool!r} in the flow's tool set"
            problems.append(SpecProblem(f"flow.{i}.call.tool", reason))
    if spec.workspace and base_dir and not os.path.isdir(os.path.join(base_dir, spec.workspace)):
        problems.append(SpecProblem("workspace", f"{spec.workspace!r} is not a folder"))
    return problems


def endpoint_problems(spec: RunSpec, settings: Settings) -> list[SpecProblem]:
    """A model endpoint or credential variable the spec names that this deployment does
    not list (`agentledger.events.model_reach`)."""
    model = spec.model
    refused = reach_refusals(
        f"model.{model.provider}", model.named_endpoint, model.named_key_variable,
        urls=settings.model_endpoints, variables=settings.model_key_var_names,
    )  # fmt: skip
    return [SpecProblem(where, reason) for where, reason in refused]


# a check's default timeout (300 s) is never refused: it is held to the maximum when it runs
DEFAULT_CHECK_TIMEOUT_S = CommandCheck.model_fields["timeout_s"].default


def timeout_problems(spec: RunSpec, settings: Settings) -> list[SpecProblem]:
    """The timeouts the spec asks for (given, not defaulted) beyond the operator's maxima."""
    asked: list[tuple[str, float, float, str]] = []
    for i, check in enumerate(spec.acceptance):
        if isinstance(check, CommandCheck) and check.timeout_s != DEFAULT_CHECK_TIMEOUT_S:
            asked.append((f"acceptance.{i}.timeout_s", check.timeout_s,
                          settings.max_command_timeout_s, "AGENTLEDGER_MAX_COMMAND_TIMEOUT_S"))  # fmt: skip
    if spec.budgets.tool_timeout_s is not None:
        asked.append(("budgets.tool_timeout_s", spec.budgets.tool_timeout_s,
                      settings.max_tool_timeout_s, "AGENTLEDGER_MAX_TOOL_TIMEOUT_S"))  # fmt: skip
    return [
        SpecProblem(field, f"{value:g} s is over this deployment's maximum of {most:g} s ({var})")
        for field, value, most, var in asked
        if value > most
    ]


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
                problems.append(
                    SpecProblem(f"acceptance.{i}.tool", f"{check.tool!r} is not read-only")
                )
            t = toolset.get(check.tool) if toolset is not None else None
            if t is not None and (wrong := _input_problem(t, check.input)) is not None:
                problems.append(SpecProblem(f"acceptance.{i}.input", wrong))
        if isinstance(check, PythonCheck):
            module = check.python.split(":")[0]
            if not any(module == m or module.startswith(f"{m}.") for m in modules):
                reason = (
                    f"{module!r} is not one of the run's tool modules {list(modules)}: "
                    "workers import only their tool set"
                )
                problems.append(SpecProblem(f"acceptance.{i}.python", reason))
            elif toolset is not None and (why := _check_problem(check.python)) is not None:
                problems.append(SpecProblem(f"acceptance.{i}.python", why))
    return problems


def _input_problem(t: RegisteredTool, given: dict[str, Any]) -> str | None:
    """What is wrong with a tool check's `input`, each field in plain words."""
    errors = t.check(given)[1]
    if not errors:
        return None
    if isinstance(t, ExternalTool):  # its server's JSON schema said so, in its own words
        return "; ".join(f"{e.loc}: {reworded(e.msg)}" for e in errors)
    try:
        t.args_model.model_validate(given)
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(input)'}: {plain_reason(e, given=', got ')}"
            for e in exc.errors()
        )
    return "; ".join(f"{e.loc}: {reworded(e.msg)}" for e in errors)


def _check_problem(target: str) -> str | None:
    """Why a `python:` check of the tool set in hand would not be called (its module
    is the tool set's own code, imported here as the worker would import it)."""
    module, name = target.split(":")
    try:
        fn = getattr(importlib.import_module(module), name, None)
    except Exception as exc:  # noqa: BLE001 -- tool code raising anything on import: say why
        return f"cannot import {module!r}: {type(exc).__name__}: {exc}"
    return None if REGISTRY.is_check(fn) else not_a_check(target)


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
