"""Budget rules, checked on transitions (before each model request), never in prose."""

from __future__ import annotations

from events.state import RunState
from events.types import RunBudgetExhausted


def turns_left(s: RunState) -> int:
    return s.spec.budgets.max_turns - s.turns_used


def exhausted_before_model_request(s: RunState) -> RunBudgetExhausted | None:
    """The event that ends the run if another model request would break a budget."""
    if turns_left(s) <= 0:
        limit = s.spec.budgets.max_turns
        return RunBudgetExhausted(
            budget="turns",
            used=s.turns_used,
            limit=limit,
            detail=f"{s.turns_used} of {limit} turns used; {_done_so_far(s)}",
        )
    return None


def _done_so_far(s: RunState) -> str:
    calls = [c for t in s.turns for c in t.calls]
    done = sum(c.status.finished for c in calls)
    return f"{done} tool calls finished"
