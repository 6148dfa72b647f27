"""Budget rules, checked on transitions (before each model request and each
tool claim), never in prose. When several are exceeded at once the run still
ends once, by the first in this order: wall clock, cost, input tokens, output
tokens, turns, consecutive failures.

A model request is checked as it would be sent: the handler assembles the
context view once and hands its size here (`RequestEstimate`), so the estimate
counts the whole request — system, tools, messages — and the most output the
request may produce (`max_tokens`; for a scripted model, its next turn)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agentledger.events.context_view import ContextView, assemble
from agentledger.events.counted import counted
from agentledger.events.pricing import output_rate, price_of, worst_input_rate
from agentledger.events.repeat import consecutive_failures
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus
from agentledger.events.types import BudgetName, Event, RunBudgetExhausted, RunTimedOut

# real tokenizers give 3-4 characters a token of JSON and prose: the cost guard
# counts 3, so an estimate errs on the side of not sending
COST_CHARS_PER_TOKEN = 3


@dataclass(frozen=True, slots=True)
class RequestEstimate:
    """The next request: its input (characters of the view, ~tokens) and most output."""

    input_chars: int
    input_tokens: int
    max_output_tokens: int

    @property
    def worst_input_tokens(self) -> int:
        return -(-self.input_chars // COST_CHARS_PER_TOKEN)


def estimate_request(s: RunState, view: ContextView) -> RequestEstimate:
    return RequestEstimate(view.chars, view.tokens, max_output_tokens(s))


def max_output_tokens(s: RunState) -> int:
    """The most output the next reply may bring (0: the model does not say)."""
    limit = s.spec.model.output_after(s.turns_used)
    return limit if limit is not None else 0


def turns_left(s: RunState) -> int:
    return s.spec.budgets.max_turns - s.turns_used


def wall_clock_exceeded(s: RunState, *, now: float) -> RunTimedOut | None:
    limit = s.spec.budgets.max_wall_clock_s
    elapsed = now - (s.created_at if s.clock_from is None else s.clock_from)
    if limit is None or elapsed < limit:
        return None
    detail = f"{elapsed:.1f}s of {limit:g}s wall clock used; {done_so_far(s)}"
    return RunTimedOut(limit_s=limit, elapsed_s=round(elapsed, 3), detail=detail)


def exceeded_before_model_request(
    s: RunState, *, now: float, estimate: RequestEstimate | None = None
) -> Event | None:
    """The event that ends the run if another model request would break a budget.
    Without an `estimate` the view is assembled here (tests; the handler hands one)."""
    if (timed_out := wall_clock_exceeded(s, now=now)) is not None:
        return timed_out
    est = estimate if estimate is not None else estimate_request(s, assemble(s))
    rules: tuple[Callable[[RunState, RequestEstimate], RunBudgetExhausted | None], ...] = (
        _cost, _input_tokens, _output_tokens, _turns, _consecutive_failures,
    )  # fmt: skip
    return next((e for rule in rules if (e := rule(s, est)) is not None), None)


def exceeded_by_sampling(s: RunState, est: RequestEstimate) -> RunBudgetExhausted | None:
    """The budget an MCP server's model request (sampling) during a call would break:
    cost, input or output tokens (it takes no turn)."""
    rules = (_cost, _input_tokens, _output_tokens)
    return next((e for rule in rules if (e := rule(s, est)) is not None), None)


def output_tokens_left(s: RunState) -> int | None:
    """Output tokens the run may still use (None: no limit)."""
    limit = s.spec.budgets.max_output_tokens
    return None if limit is None else max(0, limit - s.usage.output_tokens)


def request_cost_bound(s: RunState, est: RequestEstimate) -> float:
    """The most the next request could cost: every input token at the dearest rate
    it may be billed (a cache write when caching is on) and all of `max_tokens`."""
    price = price_of(model_id(s), s.spec.budgets.prices)
    if price is None:
        return 0.0
    caching, ttl = s.spec.model.caching
    prompt = est.worst_input_tokens
    rate_in = worst_input_rate(price, caching=caching, ttl=ttl, prompt_tokens=prompt)
    rate_out = output_rate(price, prompt_tokens=prompt)
    return (prompt * rate_in + est.max_output_tokens * rate_out) / 1_000_000


def _cost(s: RunState, est: RequestEstimate) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_cost_usd
    if limit is None:
        return None
    worst = s.cost_usd + request_cost_bound(s, est)
    if worst <= limit:
        return None
    what = (
        f"${s.cost_usd:.4f} spent; the next request could bring it to ${worst:.4f} (limit "
        f"${limit:g}): ~{est.worst_input_tokens} tokens in, up to {est.max_output_tokens} out"
    )
    return _exhausted(s, "cost", s.cost_usd, limit, what)


def prompt_tokens_used(s: RunState) -> int:
    """Every input token so far, cached or not."""
    u = s.usage
    return u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens


def _input_tokens(s: RunState, est: RequestEstimate) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_input_tokens
    used = prompt_tokens_used(s)
    if limit is None or used + est.input_tokens <= limit:
        return None
    what = f"{used} input tokens used; the next request needs ~{est.input_tokens} (limit {limit})"
    return _exhausted(s, "input_tokens", used, limit, what)


def _output_tokens(s: RunState, _: RequestEstimate) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_output_tokens
    used = s.usage.output_tokens
    if limit is None or used < limit:
        return None
    return _exhausted(s, "output_tokens", used, limit, f"{used} of {limit} output tokens used")


def _turns(s: RunState, _: RequestEstimate) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_turns
    if s.turns_used < limit:
        return None
    return _exhausted(
        s, "turns", s.turns_used, limit, f"{s.turns_used} of {counted(limit, 'turn')} used"
    )


def _consecutive_failures(s: RunState, _: RequestEstimate) -> RunBudgetExhausted | None:
    limit = s.spec.budgets.max_consecutive_failures
    failing = consecutive_failures(s)
    if limit is None or failing < limit:
        return None
    return _exhausted(
        s, "consecutive_failures", failing, limit, f"{counted(failing, 'failing step')} in a row"
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


def model_id(s: RunState) -> str:
    return s.spec.model.model_id


def done_so_far(s: RunState) -> str:
    calls = [c for t in s.turns for c in t.calls]
    ok = sum(c.status is CallStatus.SUCCEEDED for c in calls)
    calls_made = counted(len(calls), "tool call")
    return f"done so far: {counted(s.turns_used, 'turn')}, {ok} of {calls_made} succeeded"
