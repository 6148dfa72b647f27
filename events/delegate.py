"""The built-in `delegate(task, tools, budgets)` tool, decided from the parent's state
alone: whether a call may start a child run (`refusal`: why not, told to the model,
nothing started), the child's id (the parent's and the call's: a call driven again
finds its child, never a second one) and its spec, and what the call returns when
the child has ended (`delegate_outcome`).

A child acts for its parent's principal (its tenant and scopes: a call has no say),
with at most the tool modules the spec's `delegate.tools` names among the parent's,
its budgets the spec's defaults or the call's, never more than the parent has left,
and `delegate:` one level shallower (none at the last level: it cannot delegate).
Fan-out is bounded in all (`max_children`) and at once (`max_at_once`)."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentledger.events.budgets import prompt_tokens_used
from agentledger.events.flow_children import MAX_SUMMARY_CHARS, child_id, final_text, held_budgets
from agentledger.events.flow_events import ChildRunEnded
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import Errored, Outcome, Stopped, Succeeded, record_outcome
from agentledger.events.types import Event, ToolError
from agentledger.schemas.spec import Budgets, ModelSpec, RunSpec

DELEGATE = "delegate"
STAGE = "delegate:"  # a child's RunCreated.stage: `delegate:<call id>`
ARGS = frozenset({"task", "tools", "budgets"})
BUDGET_KEYS = ("max_turns", "max_input_tokens", "max_output_tokens", "max_cost_usd",
               "max_wall_clock_s")  # fmt: skip
_MODEL: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)


def offered(spec: RunSpec) -> tuple[str, ...]:
    """What a run's tools are offered by: its modules, and `delegate` when its spec sets it."""
    return (*spec.tools, DELEGATE) if spec.delegate is not None else spec.tools


def delegate_child_id(parent_id: str, call_id: str) -> str:
    """The child of `call_id`: the parent's id (its shard kept), the call's hashed."""
    return child_id(parent_id, "d" + hashlib.sha256(call_id.encode()).hexdigest()[:12], 1)


def is_delegate_child(parent: RunState, call_id: str, found: RunState) -> bool:
    """`found` is the child the call started (its own RunCreated says so), not a run
    that merely holds its id."""
    return found.parent_run_id == parent.run_id and found.stage == f"{STAGE}{call_id}"


def left_of(s: RunState, *, now: float) -> dict[str, Any]:
    """What the parent has left of each budget it sets (its ended children's spend is
    in its own)."""
    b = s.spec.budgets
    left: dict[str, Any] = {"max_turns": b.max_turns - s.turns_used}
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


def refusal(s: RunState, call: Call, *, now: float) -> str | None:
    """Why this delegate call may not start a child (None: it may)."""
    return _refused(s, call, now=now) or _fan_out_refused(s, call, now=now)


def _refused(s: RunState, call: Call, *, now: float) -> str | None:
    d, args = s.spec.delegate, call.input
    if d is None:
        return ("this run may not start child runs (its spec has no `delegate:`, or the "
                "tree is at its max_depth)")  # fmt: skip
    extra = sorted(set(args) - ARGS)
    if extra:
        return (f"delegate takes task, tools and budgets only, not {', '.join(extra)} (a child "
                "acts for this run's principal, tenant and scopes)")  # fmt: skip
    if (why := _tools_refused(s, args.get("tools"))) is not None:
        return why
    return _budgets_refused(s, args.get("budgets"), now=now)


def _allowed_tools(s: RunState) -> tuple[str, ...]:
    d = s.spec.delegate
    assert d is not None
    return tuple(t for t in (d.tools or s.spec.tools) if t in s.spec.tools)


def _tools_refused(s: RunState, asked: Any) -> str | None:
    if asked is None:
        return None
    allowed = _allowed_tools(s)
    if not isinstance(asked, list) or not all(isinstance(t, str) for t in asked):
        return "tools must be a list of tool module names"
    for name in asked:
        if name not in allowed:
            return (f"tool module {name!r} is not one this run may give a child (it may: "
                    f"{', '.join(allowed) or 'none'})")  # fmt: skip
    return None


def _budgets_refused(s: RunState, asked: Any, *, now: float) -> str | None:
    if asked is None:
        return None
    if not isinstance(asked, dict):
        return "budgets must be an object of budgets (max_turns, max_cost_usd, …)"
    left = left_of(s, now=now)
    for key, value in asked.items():
        if key not in BUDGET_KEYS:
            return f"budgets.{key} is not a budget a child may be given ({', '.join(BUDGET_KEYS)})"
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            return f"budgets.{key} must be a positive number"
        if key in left and value > left[key]:
            return f"budgets.{key} {value:g} is more than this run has left ({left[key]:g})"
    return None


def _fan_out_refused(s: RunState, call: Call, *, now: float) -> str | None:
    d = s.spec.delegate
    assert d is not None
    every = [c for t in s.turns for c in t.calls]
    place = next(i for i, c in enumerate(every) if c.call_id == call.call_id)
    before = [  # an earlier ask in this turn that will be refused starts nothing
        c for c in every[:place] if c.name == DELEGATE and c.status is not CallStatus.REJECTED
        and (c.status is not CallStatus.PROPOSED or _refused(s, c, now=now) is None)
    ]  # fmt: skip
    if len(before) >= d.max_children:
        return f"this run has started its {d.max_children} child runs (max_children)"
    running = [c for c in before if not c.status.finished]
    if len(running) >= d.max_at_once:
        return f"{len(running)} child runs go on already (max_at_once {d.max_at_once})"
    return None


def child_spec(s: RunState, call: Call, *, now: float) -> RunSpec:
    """The child's spec (after `refusal` said None). ValueError: the spec's
    `delegate.model` or `.budgets` is not a run's."""
    d, p, args = s.spec.delegate, s.spec, call.input
    assert d is not None
    try:
        model = _MODEL.validate_python(d.model) if d.model is not None else p.model
        own = Budgets.model_validate({**d.budgets, **(args.get("budgets") or {})})
    except ValidationError as exc:
        raise ValueError(f"the spec's delegate: {exc.errors()[0]['msg']}") from None
    deeper = d.model_copy(update={"max_depth": d.max_depth - 1}) if d.max_depth > 1 else None
    return RunSpec(
        task=str(args.get("task", "")), tools=tuple(args.get("tools") or _allowed_tools(s)),
        system=p.system, model=model, budgets=held_budgets(own, left_of(s, now=now), p.budgets),
        principal=p.principal, tool_path=p.tool_path, queue=p.queue, policies=p.policies,
        context=p.context, secrets=p.secrets, keep_secrets_in_log=p.keep_secrets_in_log,
        workspace=p.workspace, copy_workspace=False, delegate=deeper,
    )  # fmt: skip


def delegate_outcome(child: RunState) -> dict[str, Any]:
    """What the delegate call returns once its child has ended."""
    u = child.usage
    return {
        "run_id": child.run_id, "status": str(child.status), "result": final_text(child),
        "detail": child.detail, "turns": child.turns_used, "cost_usd": child.cost_usd,
        "usage": {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens},
    }  # fmt: skip


def waits_on_children(s: RunState) -> list[Call]:
    """The delegate calls whose children go on (or ended unrecorded) in the turn."""
    turn = s.current_turn
    live = (CallStatus.STARTED, CallStatus.OUTCOME_UNKNOWN)
    return [c for c in turn.calls if c.name == DELEGATE and c.status in live] if turn else []


def child_ended(s: RunState, call_id: str, child: RunState, *, now: float) -> list[Event]:
    """The call's child ended: its spend added to the parent's (`ChildRunEnded`) and the
    call's outcome, once ([] while it goes on, or once recorded). A run that merely
    holds the child's id is never taken for it: the call fails."""
    call = s.call(call_id)
    if call is None or call not in waits_on_children(s) or not child.status.terminal:
        return []
    times = {"started_at": call.started_at or now, "finished_at": now}
    if not is_delegate_child(s, call_id, child):
        taken = ToolError(code="permission_denied", message=f"the id of its child run "
                          f"{child.run_id} is another run's: nothing started", retryable=False)  # fmt: skip
        return record_outcome(s, call_id, attempt=call.attempts, outcome=Errored(taken), **times)
    outcome: Outcome = Succeeded(delegate_outcome(child))
    if s.cancel_requested_at is not None and child.status is RunStatus.CANCELLED:
        outcome = Stopped(requested_at=s.cancel_requested_at, killed=False, detail=child.detail)
    recorded = record_outcome(s, call_id, attempt=call.attempts, outcome=outcome, **times)
    ended = ChildRunEnded(
        stage=f"{STAGE}{call_id}", attempt=1, child_run_id=child.run_id,
        outcome=str(child.status), status=str(child.status),
        result={"summary": final_text(child)[:MAX_SUMMARY_CHARS]}, usage=child.usage,
        cost_usd=child.cost_usd, turns=child.turns_used, detail=child.detail,
    )  # fmt: skip
    if not recorded:
        return []
    if s.status in (RunStatus.CANCELLED, RunStatus.COMPLETED):
        return recorded  # a late outcome only (the table has no spend row after these ends)
    return [ended, *recorded]


def failed_to_start(s: RunState, call_id: str, why: str, *, now: float) -> list[Event]:
    """The child could not be made (the spec's `delegate:` is not a run's): the call fails."""
    call = s.call(call_id)
    if call is None or call.status is not CallStatus.STARTED:
        return []
    error = ToolError(code="invalid_arguments", message=why, retryable=False)
    return record_outcome(s, call_id, attempt=call.attempts, outcome=Errored(error),
                          started_at=call.started_at or now, finished_at=now)  # fmt: skip
