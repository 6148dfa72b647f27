"""A flow's spec, checked before anything runs: every template names only the flow's
input and the stages before its own (`agentledger.events.flow_template.reference_problem`),
no placeholder is left unclosed, `max_loops: 0` comes with no route back, an agent
stage's tool modules are among the flow's (a child never reaches beyond its parent's
tool set), and each agent stage reads as a run spec of its own (`stage_specs`, which
the spec check checks as it checks any run's)."""

from __future__ import annotations

from agentledger.events.flow_template import (
    reference_problem,
    references,
    stray_placeholders,
    templates_of,
)
from agentledger.schemas.flow_spec import Stage
from agentledger.schemas.spec import RunSpec, agent_parts

Problem = tuple[str, str]  # (where, what is wrong)


def _templates(stage: Stage) -> list[tuple[str, str]]:
    if stage.agent is not None:
        return [("agent.task", stage.agent.task)]
    if stage.call is not None:
        return [("call.input", t) for t in templates_of(stage.call.input)]
    assert stage.human is not None
    return [("human.question", stage.human.question)]


def flow_problems(spec: RunSpec) -> list[Problem]:
    """What is wrong with the spec's flow (none for a run without one)."""
    stages = spec.flow or ()
    ids = [s.id for s in stages]
    problems: list[Problem] = []
    if stages and spec.acceptance:
        reason = "a flow's own run runs no checks: give them to its agent stages, or a call stage"
        problems.append(("acceptance", reason))
    for i, stage in enumerate(stages):
        for where, template in _templates(stage):
            for parts in references(template):
                if (
                    why := reference_problem(parts, ids) or _not_before(parts, ids[:i])
                ) is not None:
                    problems.append((f"flow.{i}.{where}", why))
            for stray in stray_placeholders(template, ["input", *ids]):
                problems.append((f"flow.{i}.{where}", stray))
        problems += _dead_loops(spec, i, stage, ids)
        if stage.agent is not None and stage.agent.tools is not None:
            beyond = sorted(set(stage.agent.tools) - set(spec.tools))
            if beyond:
                reason = f"tool modules {beyond} are not among the flow's `tools`"
                problems.append((f"flow.{i}.agent.tools", reason))
    return problems


def _not_before(parts: tuple[str, ...], before: list[str]) -> str | None:
    """A template reads only the results of stages before its own in the list (a later
    one, or its own, has none the first time the stage runs)."""
    if parts[0] == "input" or parts[0] in before:
        return None
    name = "{" + ".".join(parts) + "}"
    return f"{name}: stage {parts[0]!r} is not before this one: a template reads earlier stages"


def _dead_loops(spec: RunSpec, i: int, stage: Stage, ids: list[str]) -> list[Problem]:
    """`max_loops: 0` with a route back: that route could only ever end the flow failed."""
    if spec.max_loops > 0:
        return []
    back = [(o, to) for o, to in stage.on.items() if to in ids and ids.index(to) <= i]
    return [
        ("max_loops", f"0 allows no route back, but stage {stage.id!r} routes {o} back to "
         f"{to!r}: set max_loops to 1 or more, or route {o} elsewhere")
        for o, to in back
    ]  # fmt: skip


def stage_specs(spec: RunSpec) -> list[tuple[str, RunSpec]]:
    """Each agent stage as the run spec its child will hold (templates unfilled,
    budgets not yet held to what the flow has left), with where it is written."""
    out: list[tuple[str, RunSpec]] = []
    for i, stage in enumerate(spec.flow or ()):
        if stage.agent is None:
            continue
        model, budgets, checks = agent_parts(stage, spec.model)
        a = stage.agent
        made = spec.model_copy(
            update={
                "task": a.task, "tools": a.tools if a.tools is not None else spec.tools,
                "system": a.system if a.system is not None else spec.system, "model": model,
                "budgets": budgets, "acceptance": checks, "flow": None,
            }
        )  # fmt: skip
        out.append((f"flow.{i}.agent", made))
    return out
