"""Checks of a run spec that need the tools loaded: refused before anything is
appended, each naming the field, all problems at once."""

from __future__ import annotations

import os

from events.pricing import price_of
from schemas.errors import InvalidSpec, SpecProblem
from schemas.spec import AnthropicModel, ReplayModel, RunSpec, ScriptedModel, ToolCheck
from services.adapters.tools.registry import ToolRegistry


def tool_paths(spec: RunSpec, base_dir: str | None) -> list[str]:
    paths = [p for p in (base_dir, *spec.tool_path) if p]
    return [os.path.join(base_dir, p) if base_dir and not os.path.isabs(p) else p for p in paths]


def check_spec(spec: RunSpec, base_dir: str | None, registry: ToolRegistry) -> None:
    problems = _problems(spec, base_dir, registry)
    if problems:
        raise InvalidSpec.of(problems)


def _problems(spec: RunSpec, base_dir: str | None, registry: ToolRegistry) -> list[SpecProblem]:
    problems: list[SpecProblem] = []
    for i, module in enumerate(spec.tools):
        try:
            registry.load([module], tool_paths(spec, base_dir))
        except Exception as exc:  # any failure importing user code is a bad spec
            problems.append(
                SpecProblem(f"tools.{i}", f"cannot import {module!r}: {type(exc).__name__}: {exc}")
            )
    offered = {t.spec.name: t for t in registry.of_modules(spec.tools)}
    for i, check in enumerate(spec.acceptance if not problems else ()):  # they need the tools
        if isinstance(check, ToolCheck):
            t = offered.get(check.tool)
            if t is None:
                problems.append(
                    SpecProblem(f"acceptance.{i}.tool", f"no tool {check.tool!r} in {list(spec.tools)}")
                )
                continue
            if not t.spec.read_only:
                problems.append(
                    SpecProblem(f"acceptance.{i}.tool", f"{check.tool!r} is not read-only")
                )
            _, errors = t.check(check.input)
            if errors:
                problems.append(
                    SpecProblem(
                        f"acceptance.{i}.input", "; ".join(f"{e.loc}: {e.msg}" for e in errors)
                    )
                )
    if isinstance(spec.model, ScriptedModel):
        seen: set[str] = set()
        for t, turn in enumerate(spec.model.scripted):
            for c, call in enumerate(turn.tool_use or ()):
                if call.id in seen:
                    problems.append(
                        SpecProblem(
                            f"model.scripted.{t}.tool_use.{c}.id", f"{call.id!r} is used twice"
                        )
                    )
                seen.add(call.id)
    if isinstance(spec.model, AnthropicModel) and spec.model.anthropic.temperature is not None:
        problems.append(
            SpecProblem(
                "model.anthropic.temperature",
                "the Messages API version the anthropic SDK sends refuses sampling parameters",
            )
        )
    # a replay costs what the recorded replies cost, priced by their recorded model ids
    if spec.budgets.max_cost_usd is not None and not isinstance(spec.model, ReplayModel):
        model = spec.model.anthropic.model if isinstance(spec.model, AnthropicModel) else "scripted"
        if price_of(model, spec.budgets.prices) is None:
            problems.append(
                SpecProblem("budgets.prices", f"a cost budget needs a price for model {model!r}")
            )
    if spec.workspace and base_dir:
        ws = os.path.join(base_dir, spec.workspace)
        if not os.path.isdir(ws):
            problems.append(SpecProblem("workspace", f"{ws!r} is not a folder"))
    return problems
