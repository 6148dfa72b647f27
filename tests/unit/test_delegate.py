"""The delegate tool's rules, from the parent's state alone (events/delegate.py): who
may start a child, with what, how many, and the child's spec — never more than the
parent's principal, tools and budgets left."""

from __future__ import annotations

from typing import Any

from runlog import Log, do_model_turn, make_spec, use

from agentledger.events.delegate import (
    child_spec,
    delegate_child_id,
    offered,
    refusal,
)
from agentledger.schemas.delegate_spec import DelegateSpec


def parent(*calls: dict[str, Any], **delegate: Any) -> Log:
    spec = make_spec(max_turns=10, budgets={"max_output_tokens": 1000})
    tools = spec.tools
    d = DelegateSpec.model_validate({"tools": list(tools[:1]), **delegate})
    log = Log.created(spec.model_copy(update={"delegate": d}))
    do_model_turn(log, *(use(c.pop("id"), "delegate", **c) for c in calls))
    return log


def refused(log: Log, call_id: str) -> str | None:
    call = log.s.call(call_id)
    assert call is not None
    return refusal(log.s, call, now=log.now)


def test_refused_asks_do_not_count_against_the_fan_out() -> None:
    log = parent(
        {"id": "t", "task": "x", "tools": ["nope"]}, {"id": "p", "task": "x", "principal": {}},
        {"id": "a", "task": "x"}, {"id": "b", "task": "x"}, {"id": "c", "task": "x"},
    )  # fmt: skip
    assert "'nope' is not one this run may give" in (refused(log, "t") or "")
    assert "not principal" in (refused(log, "p") or "")
    assert refused(log, "a") is None and refused(log, "b") is None
    assert "max_at_once 2" in (refused(log, "c") or "")


def test_budgets_over_what_is_left_are_refused_and_the_child_holds_to_it() -> None:
    log = parent({"id": "big", "task": "x", "budgets": {"max_output_tokens": 5000}},
                 {"id": "ok", "task": "x", "budgets": {"max_turns": 3}})  # fmt: skip
    assert "max_output_tokens 5000 is more than this run has left (1000)" in (
        refused(log, "big") or ""
    )
    call = log.s.call("ok")
    assert call is not None and refused(log, "ok") is None
    child = child_spec(log.s, call, now=log.now)
    assert child.budgets.max_turns == 3 and child.budgets.max_output_tokens == 1000
    assert child.principal == log.s.spec.principal and child.delegate is None
    assert child.tools == log.s.spec.tools[:1]


def test_depth_goes_down_a_level_and_the_tool_is_offered_only_when_set() -> None:
    log = parent({"id": "a", "task": "x"}, max_depth=2)
    call = log.s.call("a")
    assert call is not None
    child = child_spec(log.s, call, now=log.now)
    assert child.delegate is not None and child.delegate.max_depth == 1
    assert "delegate" in offered(log.s.spec) and "delegate" not in offered(
        child.model_copy(update={"delegate": None})
    )
    one, again = delegate_child_id("r-abc.s3", "toolu_1"), delegate_child_id("r-abc.s3", "toolu_1")
    assert one == again and one.endswith(".s3") and one != delegate_child_id("r-abc.s3", "toolu_2")


def test_a_call_past_max_children_is_refused() -> None:
    log = parent(*({"id": c, "task": "x"} for c in ("a", "b", "c")), max_children=2, max_at_once=3)
    assert refused(log, "a") is None and refused(log, "b") is None
    assert "started its 2 child runs (max_children)" in (refused(log, "c") or "")


def test_a_spec_without_delegate_refuses_the_call_by_name() -> None:
    log = Log.created(make_spec(max_turns=5))
    do_model_turn(log, use("x", "delegate", task="x"))
    call = log.s.call("x")
    assert call is not None
    assert "may not start child runs" in (refusal(log.s, call, now=log.now) or "")
    assert "delegate" not in offered(log.s.spec)


def held(log: Log, call_id: str) -> Any:
    call = log.s.call(call_id)
    assert call is not None
    return child_spec(log.s, call, now=log.now).budgets


def test_children_side_by_side_share_what_is_left_and_never_hold_more_together() -> None:
    log = parent({"id": "a", "task": "x"}, {"id": "b", "task": "x"})
    a, b = held(log, "a"), held(log, "b")
    assert a.max_output_tokens == 500 and b.max_output_tokens == 500
    assert a.max_turns + b.max_turns <= 10 - log.s.turns_used


def test_a_named_budget_is_taken_out_before_the_next_call_asks() -> None:
    log = parent({"id": "a", "task": "x", "budgets": {"max_output_tokens": 800}},
                 {"id": "b", "task": "x", "budgets": {"max_output_tokens": 300}},
                 {"id": "c", "task": "x"}, max_at_once=3)  # fmt: skip
    assert held(log, "a").max_output_tokens == 800
    assert "max_output_tokens 300 is more than this run has left (200)" in (refused(log, "b") or "")
    assert held(log, "c").max_output_tokens == 200, "a refused ask holds nothing"


def test_nothing_left_to_give_refuses_the_call() -> None:
    log = parent({"id": "a", "task": "x", "budgets": {"max_output_tokens": 1000}},
                 {"id": "b", "task": "x"})  # fmt: skip
    assert refused(log, "a") is None
    assert "no max_output_tokens left to give a child" in (refused(log, "b") or "")


def test_a_hundred_asks_in_one_turn_are_decided_once_each_not_recursively() -> None:
    log = parent(*({"id": f"c{i}", "task": "x"} for i in range(100)), max_children=4)
    reasons = [refused(log, f"c{i}") for i in range(100)]
    assert reasons[:2] == [None, None]
    assert all("max_at_once 2" in (r or "") for r in reasons[2:])
