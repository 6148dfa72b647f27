"""The built-in `delegate(task, tools, budgets)` tool, decided from the parent's state
alone: whether a call may start a child run (`refusal`: why not, told to the model,
nothing started), the child's id (the parent's and the call's: a call driven again
finds its child, never a second one) and its spec, and what the call returns when
the child has ended (`delegate_outcome`).

A child acts for its parent's principal (its tenant and scopes: a call has no say),
with at most the tool modules the spec's `delegate.tools` names among the parent's,
its budgets the spec's defaults or the call's, never more than the parent has left,
and `delegate:` one level shallower (none at the last level: it cannot delegate).
Fan-out is bounded in all (`max_children`) and at once (`max_at_once`).

Children side by side hold their budgets as reservations (`holds`): the calls of a
turn, in their order, each take their budgets (a budget they do not name: an equal
share of what is left among them and the calls after them) out of what the parent
has left, so the children of a turn can never together be given more than the parent
has — decided from the parent's log alone, whichever process starts which child."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentledger.events.delegate_name import DELEGATE as DELEGATE  # re-exported
from agentledger.events.flow_children import (
    MAX_SUMMARY_CHARS,
    budgets_left,
    child_id,
    final_text,
    held_budgets,
)
from agentledger.events.flow_events import ChildRunEnded
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import Errored, Outcome, Stopped, Succeeded, record_outcome
from agentledger.events.types import Event, ToolError
from agentledger.schemas.spec import Budgets, ModelSpec, RunSpec

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
    in its own; their turns in their calls' outcomes)."""
    return budgets_left(s, turns=s.turns_used + _children_turns(s), now=now)


def _children_turns(s: RunState) -> int:
    """The turns of the children whose calls have their outcome."""
    return sum(
        c.output["turns"]
        for t in s.turns
        for c in t.calls
        if c.name == DELEGATE
        and isinstance(c.output, dict)
        and isinstance(c.output.get("turns"), int)
    )


def refusal(s: RunState, call: Call, *, now: float) -> str | None:
    """Why this delegate call may not start a child (None: it may)."""
    held = holds(s, now=now).get(call.call_id)
    return held if isinstance(held, str) else _refused(s, call)


def _refused(s: RunState, call: Call) -> str | None:
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
    return _budgets_malformed(args.get("budgets"))


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


def _budgets_malformed(asked: Any) -> str | None:
    if asked is None:
        return None
    if not isinstance(asked, dict):
        return "budgets must be an object of budgets (max_turns, max_cost_usd, …)"
    for key, value in asked.items():
        if key not in BUDGET_KEYS:
            return f"budgets.{key} is not a budget a child may be given ({', '.join(BUDGET_KEYS)})"
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            return f"budgets.{key} must be a positive number"
    return None


def holds(s: RunState, *, now: float) -> dict[str, Budgets | str]:
    """Each delegate call of the current turn: its child's budgets, or why it is refused
    (in the calls' order: the fan-out counted over those admitted before it)."""
    d, turn = s.spec.delegate, s.current_turn
    if d is None or turn is None:
        return {}
    asks = [c for c in turn.calls if c.name == DELEGATE and c.status is not CallStatus.REJECTED]
    why = [_refused(s, c) for c in asks]
    open_after = [0] * (len(asks) + 1)  # asks after each one that may still start a child
    for i in range(len(asks) - 1, -1, -1):
        open_after[i] = open_after[i + 1] + (why[i] is None and not asks[i].status.finished)
    started = sum(  # earlier turns' children
        c.name == DELEGATE and c.status is not CallStatus.REJECTED
        for t in s.history
        for c in t.calls
    )
    out: dict[str, Budgets | str] = {}
    left, admitted = left_of(s, now=now), list[Call]()
    for i, c in enumerate(asks):
        going = sum(not a.status.finished for a in admitted)
        if why[i] is not None:
            out[c.call_id] = why[i] or ""
        elif started + len(admitted) >= d.max_children:
            out[c.call_id] = f"this run has started its {d.max_children} child runs (max_children)"
        elif c.status.finished:
            admitted.append(c)  # its child's spend is in the parent's already
        elif going >= d.max_at_once:
            out[c.call_id] = f"{going} child runs go on already (max_at_once {d.max_at_once})"
        else:
            room = min(d.max_at_once - going, d.max_children - started - len(admitted))
            out[c.call_id] = held = _hold(s, c, left, among=max(1, min(open_after[i], room)))
            if isinstance(held, Budgets):
                admitted.append(c)
    return out


def _hold(s: RunState, c: Call, left: dict[str, Any], *, among: int) -> Budgets | str:
    """The call's child's budgets out of `left` (taken out of it), or why none: a budget
    it names over what is left, or nothing left of one it does not name (its share of
    what is left `among` the calls that may still start a child)."""
    d = s.spec.delegate
    assert d is not None
    asked = {**d.budgets, **(c.input.get("budgets") or {})}
    if (over := next((k for k, v in asked.items() if k in left and v > left[k]), None)) is not None:
        return f"budgets.{over} {asked[over]:g} is more than this run has left ({left[over]:g})"
    share = {k: _share(left[k], among, k) for k in RESERVED if k in left}
    if (
        empty := next((k for k, v in share.items() if v <= 0 and k not in asked), None)
    ) is not None:
        return f"this run has no {empty} left to give a child"
    try:
        held = held_budgets(Budgets.model_validate({**share, **asked}), left, s.spec.budgets)
    except ValidationError as exc:
        return f"the spec's delegate: {exc.errors()[0]['msg']}"
    for k in RESERVED:
        if k in left and (v := getattr(held, k)) is not None:
            left[k] -= v
    return held


RESERVED = ("max_turns", "max_input_tokens", "max_output_tokens", "max_cost_usd")


def _share(left: float, among: int, key: str) -> float:
    return left // among if key in ("max_turns", "max_input_tokens", "max_output_tokens") else (
        left / among)  # fmt: skip


def child_spec(s: RunState, call: Call, *, now: float) -> RunSpec:
    """The child's spec (after `refusal` said None). ValueError: the spec's
    `delegate.model` or `.budgets` is not a run's."""
    d, p, args = s.spec.delegate, s.spec, call.input
    assert d is not None
    try:
        model = _MODEL.validate_python(d.model) if d.model is not None else p.model
    except ValidationError as exc:
        raise ValueError(f"the spec's delegate: {exc.errors()[0]['msg']}") from None
    held = holds(s, now=now).get(call.call_id)
    if not isinstance(held, Budgets):
        raise ValueError(held or "the call is not one of this turn's delegate calls")
    deeper = d.model_copy(update={"max_depth": d.max_depth - 1}) if d.max_depth > 1 else None
    return RunSpec(
        task=str(args.get("task", "")), tools=tuple(args.get("tools") or _allowed_tools(s)),
        system=p.system, model=model, budgets=held,
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
