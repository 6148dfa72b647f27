"""A flow stage's child run: its id and its spec, decided from the parent's state alone.

The id is the parent's, the stage's and the attempt's (`child_id`), on the parent's
shard: a flow driven again after a crash names the child it started, never a second
one. The spec acts for the parent's principal (never more scopes than the parent's
grant left it), on the parent's task queue and tool set, in the parent's workspace;
its budgets are the stage's held to what the whole flow has left (`held_budgets`):
a child can never spend what its parent has not got. A deterministic stage's child
is a run whose scripted model proposes exactly the stage's call and then ends: the
call goes through validation, locks, the ledger and idempotency like any other."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from agentledger.events.budgets import prompt_tokens_used
from agentledger.events.flow_state import FlowState
from agentledger.events.flow_template import Context, render, render_input
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.schemas.content import TextBlock
from agentledger.schemas.flow_spec import Stage
from agentledger.schemas.spec import (
    Budgets,
    RunSpec,
    ScriptedCall,
    ScriptedModel,
    ScriptedTurn,
    agent_parts,
)

_SHARD = re.compile(
    r"\.s(\d{1,4})$"
)  # a run id's shard suffix, as `agentledger.services.keys` reads it
MAX_ID = 128
CALL_DONE = "the flow's call is done"
MAX_SUMMARY_CHARS = 16_000  # of a child's final text, kept as its stage's result


def child_id(parent_id: str, stage: str, attempt: int) -> str:
    """`r-….s3` -> `r-….fix.1.s3`: the parent's shard kept; a long id is hashed short."""
    found = _SHARD.search(parent_id)
    base, shard = (parent_id[: found.start()], found.group(0)) if found else (parent_id, "")
    made = f"{base}.{stage}.{attempt}{shard}"
    if len(made) <= MAX_ID:
        return made
    digest = hashlib.sha256(made.encode()).hexdigest()[:16]
    return f"{base[:60]}.{digest}.{stage}.{attempt}{shard}"


def context_of(s: RunState, flow: FlowState) -> Context:
    """What templates read: the flow's task, and each stage's latest result and outcome."""
    ctx: dict[str, dict[str, Any]] = {"input": {"task": s.spec.task}}
    outcomes = dict(flow.outcomes)
    for stage, result in flow.results:
        ctx[stage] = {"result": result, "outcome": outcomes.get(stage, "")}
    return ctx


def left_of(s: RunState, flow: FlowState, *, now: float) -> dict[str, Any]:
    """What the whole flow has left of each budget it sets (none when unset)."""
    return budgets_left(s, turns=flow.turns, now=now)


def budgets_left(s: RunState, *, turns: int, now: float) -> dict[str, Any]:
    """What a run has left of each budget it sets (none when unset), `turns` used —
    its children's spend counted in its own (a flow's, or a delegating run's)."""
    b = s.spec.budgets
    left: dict[str, Any] = {"max_turns": b.max_turns - turns}
    if b.max_input_tokens is not None:
        left["max_input_tokens"] = b.max_input_tokens - prompt_tokens_used(s)
    if b.max_output_tokens is not None:
        left["max_output_tokens"] = b.max_output_tokens - s.usage.output_tokens
    if b.max_cost_usd is not None:
        left["max_cost_usd"] = b.max_cost_usd - s.cost_usd
    if b.max_wall_clock_s is not None:
        started = s.created_at if s.clock_from is None else s.clock_from
        left["max_wall_clock_s"] = b.max_wall_clock_s - (now - started)
    return left


def spent(left: dict[str, Any]) -> str | None:
    """The first budget the flow has nothing left of (None: every one has some)."""
    return next((k for k, v in left.items() if v <= 0), None)


def held_budgets(own: Budgets, left: dict[str, Any], parent: Budgets) -> Budgets:
    """The stage's budgets, each held to what the flow has left; the parent's prices."""
    held: dict[str, Any] = {}
    for name, limit in left.items():
        mine = getattr(own, name)
        held[name] = limit if mine is None else min(mine, limit)
    prices = {**parent.prices, **own.prices}
    return own.model_copy(update={**held, "prices": prices})


def child_spec(s: RunState, stage: Stage, flow: FlowState, *, attempt: int, now: float) -> RunSpec:
    """The spec of `stage`'s child run (TemplateError: a template cannot be filled)."""
    ctx, p = context_of(s, flow), s.spec
    left = left_of(s, flow, now=now)
    base: dict[str, Any] = dict(
        principal=p.principal, tool_path=p.tool_path, queue=p.queue, policies=p.policies,
        context=p.context, secrets=p.secrets, keep_secrets_in_log=p.keep_secrets_in_log,
        workspace=p.workspace, copy_workspace=False,
    )  # fmt: skip
    if stage.agent is not None:
        a = stage.agent
        model, own, checks = agent_parts(stage, p.model)
        return RunSpec(
            task=render(a.task, ctx), tools=a.tools if a.tools is not None else p.tools,
            system=a.system if a.system is not None else p.system, model=model,
            budgets=held_budgets(own, left, p.budgets), acceptance=checks, **base,
        )  # fmt: skip
    assert stage.call is not None
    arguments = render_input(stage.call.input, ctx)
    call = ScriptedCall(id=f"{stage.id}-{attempt}", name=stage.call.tool, input=arguments)
    script = (ScriptedTurn(tool_use=(call,)), ScriptedTurn(end_turn=CALL_DONE))
    return RunSpec(
        task=f"flow stage {stage.id!r}: call {stage.call.tool}", tools=p.tools,
        model=ScriptedModel(scripted=script, counted=False),
        budgets=held_budgets(Budgets(max_turns=2), left, p.budgets), **base,
    )  # fmt: skip


def stage_outcome(kind: str, child: RunState) -> str:
    """A stage's outcome from its child's end: an agent stage's is the child's status;
    a deterministic stage's is its call's (succeeded, or failed however it ended)."""
    if kind == "agent":
        return str(child.status)
    calls = [c for t in child.turns for c in t.calls]
    done = bool(calls) and all(c.status is CallStatus.SUCCEEDED for c in calls)
    return "succeeded" if done and child.status is RunStatus.COMPLETED else "failed"


def stage_result(kind: str, child: RunState) -> dict[str, Any]:
    """What later templates read of a stage: an agent's final text as `summary` (a JSON
    object's keys too, when the text is one); a call's output (a JSON object as is,
    anything else as `value`), or its error as `error`."""
    if kind == "agent":
        text = final_text(child)[:MAX_SUMMARY_CHARS]
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return {"summary": text, **parsed}
        return {"summary": text}
    calls = [c for t in child.turns for c in t.calls]
    if not calls:
        return {"error": child.detail or f"the call was never made: the run {child.status}"}
    call = calls[0]
    if call.status is not CallStatus.SUCCEEDED:
        return {"error": call.error.message if call.error else str(call.status)}
    return dict(call.output) if isinstance(call.output, dict) else {"value": call.output}


def final_text(child: RunState) -> str:
    """The text of the child's last model turn (empty when it had none)."""
    turn = child.current_turn
    if turn is None:
        return ""
    return "".join(b.text for b in turn.content if isinstance(b, TextBlock))
