"""Budget rules, checked on transitions (before each model request and each
tool claim), never in prose. When several are exceeded at once the run still
ends once, by the first in this order: wall clock, cost, input tokens, output
tokens, turns, consecutive failures."""

from __future__ import annotations

import json
from collections.abc import Callable

from events.context_view import assemble
from events.pricing import cost_usd, price_of
from events.repeat import consecutive_failures
from events.state import RunState
from events.status import CallStatus
from events.types import BudgetName, Event, RunBudgetExhausted, RunTimedOut
from schemas.content import Usage
from schemas.spec import AnthropicModel


def turns_left(s: RunState) -> int:
    return s.spec.budgets.max_turns - s.turns_used


def wall_clock_exceeded(s: RunState, *, now: float) -> RunTimedOut | None:
    limit = s.spec.budgets.max_wall_clock_s
    elapsed = now - s.created_at
    if limit is None or elapsed < limit:
        return None
    detail = f"{elapsed:.1f}s of {limit:g}s wall clock used; {done_so_far(s)}"
    return RunTimedOut(limit_s=limit, elapsed_s=round(elapsed, 3), detail=detail)


def exceeded_before_model_request(s: RunState, *, now: float) -> Event | None:
    """The event that ends the run if another model request would break a budget."""
    if (timed_out := wall_clock_exceeded(s, now=now)) is not None:
        return timed_out
    rules: tuple[Callable[[RunState], RunBudgetExhausted | None], ...] = (
        _cost, _input_tokens, _output_tokens, _turns, _consecutive_failures,
    )  # fmt: skip
    return next((e for rule in rules if (e := rule(s)) is not None), None)


def _cost(s: RunState) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_cost_usd
    if limit is None:
        return None
    est_in, est_out = estimate_next_request(s)
    price = price_of(model_id(s), s.spec.budgets.prices)
    worst = s.cost_usd + cost_usd(Usage(input_tokens=est_in, output_tokens=est_out), price)
    if worst <= limit:
        return None
    what = f"${s.cost_usd:.4f} spent; the next request could bring it to ${worst:.4f} (limit ${limit:g})"
    return _exhausted(s, "cost", s.cost_usd, limit, what)


def _input_tokens(s: RunState) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_input_tokens
    used = s.usage.input_tokens
    if limit is None or used + estimate_next_request(s)[0] <= limit:
        return None
    what = f"{used} input tokens used; the next request needs ~{estimate_next_request(s)[0]} (limit {limit})"
    return _exhausted(s, "input_tokens", used, limit, what)


def _output_tokens(s: RunState) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_output_tokens
    used = s.usage.output_tokens
    if limit is None or used < limit:
        return None
    return _exhausted(s, "output_tokens", used, limit, f"{used} of {limit} output tokens used")


def _turns(s: RunState) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_turns
    if s.turns_used < limit:
        return None
    return _exhausted(s, "turns", s.turns_used, limit, f"{s.turns_used} of {limit} turns used")


def _consecutive_failures(s: RunState) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_consecutive_failures
    failing = consecutive_failures(s)
    if limit is None or failing < limit:
        return None
    return _exhausted(
        s, "consecutive_failures", failing, limit, f"{failing} failing steps in a row"
    )


def _exhausted(
    s: RunState, budget: BudgetName, used: float, limit: float, what: str
) -> RunBudgetExhausted:
    return RunBudgetExhausted(
        budget=budget,
        used=used,
        limit=limit,
        detail=f"{budget}: {what}; {done_so_far(s)}",
    )


def estimate_next_request(s: RunState) -> tuple[int, int]:
    """Input tokens (~4 characters a token of the context view) and the most output."""
    sent = sum(len(json.dumps([b.model_dump() for b in m.content])) for m in assemble(s).messages)
    model = s.spec.model
    out = model.anthropic.max_tokens if isinstance(model, AnthropicModel) else 0
    return sent // 4, out


def model_id(s: RunState) -> str:
    model = s.spec.model
    return model.anthropic.model if isinstance(model, AnthropicModel) else "scripted"


def done_so_far(s: RunState) -> str:
    calls = [c for t in s.turns for c in t.calls]
    ok = sum(c.status is CallStatus.SUCCEEDED for c in calls)
    return f"done so far: {s.turns_used} turns, {ok} of {len(calls)} tool calls succeeded"
