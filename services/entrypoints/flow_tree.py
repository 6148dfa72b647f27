"""A flow's run as a tree for `status`: each stage's child run (every attempt), with
what it spent, read from the child's own log; the flow's total is its own recorded
spend (its ended children's, to the token) and what a live child has spent so far.
A run's `delegate` children are its tree too (`delegate_tree`), each with its own
children below it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentledger.events.delegate import DELEGATE, delegate_child_id, is_delegate_child
from agentledger.events.flow_children import child_id, context_of
from agentledger.events.flow_state import FlowPhase, FlowState
from agentledger.events.flow_template import TemplateError, as_text, render
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus

Load = Callable[[str], RunState | None]


def flow_tree(state: RunState, load: Load) -> dict[str, Any] | None:
    """The flow's stages and their child runs, oldest first (None: not a flow's run)."""
    flow = state.flow
    if flow is None or state.spec.flow is None:
        return delegate_tree(state, load)
    kinds = {s.id: s.kind for s in state.spec.flow}
    nodes: list[dict[str, Any]] = []
    for stage, attempts in flow.entries:
        if kinds.get(stage) == "human":
            continue
        for attempt in range(1, attempts + 1):
            child = load(child_id(state.run_id, stage, attempt))
            if child is not None:
                nodes.append(_node(stage, attempt, child))
    nodes.sort(key=lambda n: n["created_at"])
    live = [n for n in nodes if n["run_id"] == flow.child and not n["ended"]]
    total_in = state.usage.input_tokens + sum(n["input_tokens"] for n in live)
    total_out = state.usage.output_tokens + sum(n["output_tokens"] for n in live)
    return {
        "stage": flow.stage, "phase": str(flow.phase), "loops": flow.loops,
        "input_tokens": total_in, "output_tokens": total_out,
        "cost_usd": state.cost_usd + sum(n["cost_usd"] for n in live), "children": nodes,
        **({"gate": _gate(state, flow)} if flow.phase is FlowPhase.AT_GATE else {}),
    }  # fmt: skip


def _gate(state: RunState, flow: FlowState) -> dict[str, Any]:
    """What the person at the gate is asked, and the evidence so far: each stage's
    latest outcome and result."""
    stage = next(s for s in state.spec.flow or () if s.id == flow.stage)
    try:
        question = render(stage.human.question, context_of(state, flow)) if stage.human else ""
    except TemplateError as exc:
        question = str(exc)
    evidence = [{"stage": s, "outcome": flow.outcome_of(s), "result": r} for s, r in flow.results]
    return {"stage": flow.stage, "question": question, "evidence": evidence,
            "replies": "replied" in stage.on}  # fmt: skip


def _node(stage: str, attempt: int, child: RunState) -> dict[str, Any]:
    return {
        "stage": stage, "attempt": attempt, "run_id": child.run_id, "status": str(child.status),
        "ended": child.status.terminal, "input_tokens": child.usage.input_tokens,
        "output_tokens": child.usage.output_tokens, "cost_usd": child.cost_usd,
        "turns": child.turns_used, "created_at": child.created_at, "detail": child.detail,
    }  # fmt: skip


MAX_DEPTH = 5  # a delegate tree's levels shown (the spec's max_depth is at most 5)


def delegate_tree(state: RunState, load: Load, depth: int = 0) -> dict[str, Any] | None:
    """A run's `delegate` children (None: it started none): each with its spend and its
    own children; the run's total is its own recorded spend (its own turns and its ended
    children's, to the token) and what its live children have spent so far."""
    nodes: list[dict[str, Any]] = []
    for call in (c for t in state.turns for c in t.calls if c.name == DELEGATE):
        if call.status is CallStatus.REJECTED or depth >= MAX_DEPTH:
            continue
        child = load(delegate_child_id(state.run_id, call.call_id))
        if child is None or not is_delegate_child(state, call.call_id, child):
            continue
        node = _node(f"delegate:{call.call_id}", 1, child)
        below = delegate_tree(child, load, depth + 1)
        node["children"] = below["children"] if below is not None else []
        nodes.append(node)
    if not nodes:
        return None
    live = [n for n in nodes if not n["ended"]]
    return {
        "stage": "delegate", "phase": "delegating", "loops": 0,
        "input_tokens": state.usage.input_tokens + sum(n["input_tokens"] for n in live),
        "output_tokens": state.usage.output_tokens + sum(n["output_tokens"] for n in live),
        "cost_usd": state.cost_usd + sum(n["cost_usd"] for n in live), "children": nodes,
    }  # fmt: skip


def tree_lines(tree: dict[str, Any]) -> list[str]:
    """The tree as `status` prints it."""
    if tree["stage"] == "delegate":
        total = f"{tree['input_tokens']}+{tree['output_tokens']} tokens ${tree['cost_usd']:.4f}"
        return [
            f"  tree (own and children's spend): {total}",
            *_delegate_lines(tree["children"], 2),
        ]
    total = f"{tree['input_tokens']}+{tree['output_tokens']} tokens ${tree['cost_usd']:.4f}"
    head = f"  flow: at stage {tree['stage']!r} ({tree['phase']}), {tree['loops']} loop(s); {total}"
    lines = [head]
    for n in tree["children"]:
        spent = f"{n['input_tokens']}+{n['output_tokens']} tokens ${n['cost_usd']:.4f}"
        lines.append(
            f"    {n['stage']:<12} #{n['attempt']}  {n['run_id']}  {n['status']:<16} "
            f"{spent}, {n['turns']} turn(s)"
        )
        if n["status"] == "awaiting_human":
            lines.append(f"      waits for a person: {n['detail']}")
    if (gate := tree.get("gate")) is not None:
        answers = "approve, deny or reply" if gate["replies"] else "approve or deny"
        lines.append(f"  gate {gate['stage']!r} asks ({answers}): {gate['question']}")
        for e in gate["evidence"]:
            lines.append(f"    evidence: {e['stage']} {e['outcome']}: {as_text(e['result'])[:300]}")
    return lines


def _delegate_lines(nodes: list[dict[str, Any]], indent: int) -> list[str]:
    lines: list[str] = []
    for n in nodes:
        spent = f"{n['input_tokens']}+{n['output_tokens']} tokens ${n['cost_usd']:.4f}"
        pad = " " * (indent * 2)
        lines.append(f"{pad}{n['stage']:<14} {n['run_id']}  {n['status']:<16} {spent}, "
                     f"{n['turns']} turn(s)")  # fmt: skip
        lines += _delegate_lines(n.get("children", []), indent + 1)
    return lines
