"""Budgets are checked on transitions: before each model request (every budget,
the wall clock first) and before each tool claim (the wall clock), and by the
sweeper's tick (the wall clock of a live run or one waiting for approval).
Exhaustion ends the run once, naming the budget, what was used, the limit and
what was done so far; when several are exceeded together the first in the
documented order wins: wall clock, cost, input tokens, output tokens, turns,
consecutive failures."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest
from journeys import NOT_FOUND, WALL_CLOCK_S, reach
from runlog import (
    LEASE_S,
    T0,
    Log,
    do_claim,
    do_finish,
    do_model_turn,
    do_tools,
    do_validate,
    use,
)

from agentledger.events.budgets import estimate_request
from agentledger.events.context_view import assemble
from agentledger.events.dispatch import due_commands
from agentledger.events.model_step import request_model
from agentledger.events.pricing import DEFAULT_PRICES, cost_usd, price_of
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import Errored, claim_call
from agentledger.events.types import ModelRequested, RunBudgetExhausted, RunTimedOut
from agentledger.schemas.content import Usage
from agentledger.schemas.spec import Price

R = RunStatus
ORDER = ("wall_clock", "cost", "input_tokens", "output_tokens", "turns", "consecutive_failures")
# after one turn (100 tokens in, 100 out) whose one call failed, asked again at T0 + 100
EXCEEDED_BY_ONE_TURN: dict[str, dict[str, Any]] = {
    "wall_clock": {"max_wall_clock_s": 50},
    "cost": {"max_cost_usd": 2.0, "prices": {"scripted": {"input": 10_000, "output": 10_000}}},
    "input_tokens": {"max_input_tokens": 100},
    "output_tokens": {"max_output_tokens": 100},
    "turns": {"max_turns": 1},
    "consecutive_failures": {"max_consecutive_failures": 1},
}
DONE = "done so far: 1 turn, 0 of 1 tool call succeeded"


def after_one_failing_turn(*budgets: str) -> Log:
    merged: dict[str, Any] = {}
    for name in budgets:
        merged.update(EXCEEDED_BY_ONE_TURN[name])
    log = Log.created(budgets=merged)
    do_model_turn(log, use("r", path="x"), usage=Usage(input_tokens=100, output_tokens=100))
    do_validate(log, "r")
    do_claim(log, "r")
    do_finish(log, "r", Errored(NOT_FOUND))
    assert log.s.status is R.REQUESTING_MODEL
    return log


def test_within_every_budget_the_model_is_asked() -> None:
    log = after_one_failing_turn()
    [asked] = log.decide(request_model, now=T0 + 100, lease_s=LEASE_S)
    assert isinstance(asked, ModelRequested)


@pytest.mark.parametrize(
    ("budget", "used", "limit", "what"),
    [
        ("cost", 2.0, 2.0, "cost: $2.0000 spent; the next request could bring it to $"),
        ("input_tokens", 100, 100, "input_tokens: 100 input tokens used; the next request needs ~"),
        ("output_tokens", 100, 100, "output_tokens: 100 of 100 output tokens used"),
        ("turns", 1, 1, "turns: 1 of 1 turn used"),
        ("consecutive_failures", 1, 1, "consecutive_failures: 1 failing step in a row"),
    ],
)
def test_each_budget_ends_the_run_naming_what_was_used_and_done(
    budget: str, used: float, limit: float, what: str
) -> None:
    log = after_one_failing_turn(budget)
    [ended] = log.decide(request_model, now=T0 + 100, lease_s=LEASE_S)
    assert isinstance(ended, RunBudgetExhausted)
    assert (ended.budget, ended.used, ended.limit) == (budget, used, limit)
    assert ended.detail.startswith(what)
    assert ended.detail.endswith(DONE)
    assert log.s.status is R.BUDGET_EXHAUSTED
    assert log.s.detail == ended.detail
    assert request_model(log.s, now=T0 + 200, lease_s=LEASE_S) == []
    assert due_commands(log.s, now=T0 + 200) == []


def test_the_wall_clock_ends_the_run_in_timeout_with_the_time_used() -> None:
    log = after_one_failing_turn("wall_clock")
    [ended] = log.decide(request_model, now=T0 + 100, lease_s=LEASE_S)
    assert ended == RunTimedOut(
        limit_s=50, elapsed_s=100.0, detail=f"100.0s of 50s wall clock used; {DONE}"
    )
    assert log.s.status is R.TIMEOUT


@pytest.mark.parametrize(
    ("first", "second"), list(combinations(ORDER, 2)), ids=lambda name: str(name)
)
def test_two_budgets_exceeded_together_end_the_run_once_by_the_documented_order(
    first: str, second: str
) -> None:
    log = after_one_failing_turn(first, second)
    events = log.decide(request_model, now=T0 + 100, lease_s=LEASE_S)
    [ended] = events
    assert getattr(ended, "budget", "wall_clock") == first
    assert log.s.status.terminal
    assert request_model(log.s, now=T0 + 200, lease_s=LEASE_S) == []


def test_every_budget_exceeded_at_once_ends_the_run_by_the_wall_clock() -> None:
    log = after_one_failing_turn(*ORDER)
    [ended] = log.decide(request_model, now=T0 + 100, lease_s=LEASE_S)
    assert isinstance(ended, RunTimedOut)


SONNET = {"anthropic": {"model": "claude-sonnet-4-5", "max_tokens": 1000}}


def test_a_model_request_that_could_exceed_the_cost_budget_is_never_sent() -> None:
    log = Log.created(model=SONNET, budgets={"max_cost_usd": 0.02})
    # the first request could cost at most ~$0.015 (1000 output tokens at $15/M): asked
    do_model_turn(
        log,
        use("a"),
        usage=Usage(input_tokens=1000, output_tokens=200),
        model="claude-sonnet-4-5-20250929",
    )
    do_tools(log)
    assert log.s.cost_usd == pytest.approx(0.006)
    [ended] = log.decide(request_model, now=T0 + 10, lease_s=LEASE_S)
    assert isinstance(ended, RunBudgetExhausted)
    assert (ended.budget, ended.used, ended.limit) == ("cost", pytest.approx(0.006), 0.02)
    assert "$0.0060 spent; the next request could bring it to $0.02" in ended.detail
    assert "(limit $0.02)" in ended.detail
    assert [e.type for e in log.envelopes].count("ModelRequested") == 1  # never sent
    assert log.s.status is R.BUDGET_EXHAUSTED and log.s.turns_used == 1


def test_the_cost_of_a_request_is_counted_at_its_worst_case_output() -> None:
    log = Log.created(model=SONNET, budgets={"max_cost_usd": 0.01})
    # $0 spent, but 1000 output tokens at $15/M could cost $0.015
    [ended] = log.decide(request_model, now=T0, lease_s=LEASE_S)
    assert isinstance(ended, RunBudgetExhausted) and ended.budget == "cost"
    assert ended.used == 0


def test_a_spec_price_overrides_the_default_price() -> None:
    free = {"claude-sonnet-4-5": {"input": 0, "output": 0}}
    log = Log.created(model=SONNET, budgets={"max_cost_usd": 0.01, "prices": free})
    assert isinstance(log.decide(request_model, now=T0, lease_s=LEASE_S)[0], ModelRequested)


def test_prices_are_found_by_exact_id_then_longest_prefix() -> None:
    custom = {"claude-sonnet-4-5-2025": Price(input=1, output=2)}
    assert price_of("claude-sonnet-4-5", {}) == DEFAULT_PRICES["claude-sonnet-4-5"]
    assert price_of("claude-sonnet-4-5-20250929", {}) == DEFAULT_PRICES["claude-sonnet-4-5"]
    assert price_of("claude-sonnet-4-5-20250929", custom) == Price(input=1, output=2)
    assert price_of("claude-sonnet-4-20250514", {}) == DEFAULT_PRICES["claude-sonnet-4"]
    assert price_of("gpt-x", {}) is None


def test_a_cost_counts_every_kind_of_token_per_million() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=2_000_000,
        cache_read_input_tokens=1_000_000,
        cache_creation_input_tokens=1_000_000,
    )
    price = Price(input=3, output=15, cache_read=0.3, cache_write=3.75)
    assert cost_usd(usage, price) == pytest.approx(3 + 30 + 0.3 + 3.75)
    assert cost_usd(usage, None) == 0.0


def test_the_next_request_is_estimated_from_what_would_be_sent() -> None:
    log = Log.created(model=SONNET)
    first = estimate_request(log.s, assemble(log.s))
    assert first.max_output_tokens == 1000
    assert 0 < first.input_tokens < 100
    do_model_turn(log, use("a", path="x" * 4000))
    assert estimate_request(log.s, assemble(log.s)).input_tokens > first.input_tokens + 900


def test_consecutive_failures_of_different_steps_exhaust_their_budget() -> None:
    log = Log.created(max_turns=5, budgets={"max_consecutive_failures": 2, "repeat_limit": 5})
    for call_id, path in (("a", "x"), ("b", "y")):
        do_model_turn(log, use(call_id, path=path))
        do_validate(log, call_id)
        do_claim(log, call_id)
        do_finish(log, call_id, Errored(NOT_FOUND))
    [ended] = log.decide(request_model, now=log.now, lease_s=LEASE_S)
    assert isinstance(ended, RunBudgetExhausted)
    assert (ended.budget, ended.used, ended.limit) == ("consecutive_failures", 2, 2)


def test_a_success_breaks_a_run_of_failures() -> None:
    log = Log.created(max_turns=5, budgets={"max_consecutive_failures": 2})
    for call_id, outcome in (("a", Errored(NOT_FOUND)), ("b", None), ("c", Errored(NOT_FOUND))):
        do_model_turn(log, use(call_id, path=call_id))
        if outcome is None:
            do_tools(log)
            continue
        do_validate(log, call_id)
        do_claim(log, call_id)
        do_finish(log, call_id, outcome)
    assert isinstance(log.decide(request_model, now=log.now, lease_s=LEASE_S)[0], ModelRequested)


# --- the wall clock outside model requests ----------------------------------------


def test_a_tool_is_not_claimed_once_the_wall_clock_ran_out() -> None:
    log = reach(R.RUNNING_TOOLS)
    [ended] = log.decide(claim_call, "a", worker="w", now=T0 + WALL_CLOCK_S)
    assert isinstance(ended, RunTimedOut)
    assert log.call("a").status is CallStatus.VALIDATED
    assert log.s.status is R.TIMEOUT


@pytest.mark.parametrize(
    "status", [R.REQUESTING_MODEL, R.VALIDATING, R.RUNNING_TOOLS, R.ACCEPTING, R.AWAITING_APPROVAL]
)
def test_the_sweepers_tick_times_out_a_live_or_approval_waiting_run(status: RunStatus) -> None:
    log = reach(status)
    assert on_tick(log.s, now=T0 + WALL_CLOCK_S - 0.001) == []
    [ended] = log.decide(on_tick, now=T0 + WALL_CLOCK_S)
    assert isinstance(ended, RunTimedOut) and ended.limit_s == WALL_CLOCK_S
    assert log.s.status is R.TIMEOUT


def test_a_run_waiting_for_a_person_does_not_time_out_on_a_tick() -> None:
    log = reach(R.AWAITING_HUMAN)
    assert on_tick(log.s, now=T0 + 10 * WALL_CLOCK_S) == []


def test_a_cancelling_run_is_not_timed_out_while_its_calls_stop() -> None:
    log = reach(R.CANCELLING)
    assert not any(isinstance(e, RunTimedOut) for e in on_tick(log.s, now=T0 + 10 * WALL_CLOCK_S))


# --- prices of today's models, cache writes by TTL, the whole request estimated ----


def test_todays_model_ids_have_their_own_prices() -> None:
    assert price_of("claude-opus-5-5", {}) == Price(
        input=4, output=20, cache_read=0.2, cache_write=5, cache_write_1h=8
    )
    assert price_of("claude-opus-5-5-20260901", {}) == DEFAULT_PRICES["claude-opus-5-5"]
    assert price_of("claude-opus-5", {}).input == 5  # type: ignore[union-attr]
    assert price_of("claude-fable-5-2", {}).output == 40  # type: ignore[union-attr]
    assert price_of("claude-sonnet-5-5", {}).cache_read == 0.1  # type: ignore[union-attr]


def test_five_minute_and_one_hour_cache_writes_are_priced_apart() -> None:
    price = Price(input=2, output=10, cache_read=0.1, cache_write=2.5, cache_write_1h=4)
    usage = Usage(cache_creation_input_tokens=3_000_000, cache_creation_1h_input_tokens=1_000_000)
    assert cost_usd(usage, price) == pytest.approx(2 * 2.5 + 1 * 4)
    assert cost_usd(Usage(cache_read_input_tokens=1_000_000), price) == pytest.approx(0.1)
    # without a 1-hour price, an hour's write costs twice the input price, as billed
    assert cost_usd(Usage(cache_creation_input_tokens=10**6, cache_creation_1h_input_tokens=10**6),
                    Price(input=3, output=15)) == pytest.approx(6)  # fmt: skip


def test_a_long_prompt_bills_every_token_of_its_request_at_the_higher_price() -> None:
    haiku = price_of("claude-haiku-5-5", {})
    short = Usage(input_tokens=100_000, output_tokens=1_000_000)
    long = Usage(input_tokens=100_001, output_tokens=1_000_000)
    assert cost_usd(short, haiku) == pytest.approx(0.01 + 0.5)
    assert cost_usd(long, haiku) == pytest.approx(100_001 * 0.5 / 1e6 + 2.5)


def test_web_searches_cost_per_thousand() -> None:
    usage = Usage(server_tool_use={"web_search_requests": 3, "web_fetch_requests": 2})
    assert cost_usd(usage, Price(input=1, output=1)) == pytest.approx(0.03)


def test_the_cost_estimate_counts_tools_and_system_and_max_tokens_of_output() -> None:
    from agentledger.events.budgets import request_cost_bound

    log = Log.created(model=SONNET)
    view = assemble(log.s)
    est = estimate_request(log.s, view)
    assert est.input_chars == view.chars and est.max_output_tokens == 1000
    cached = request_cost_bound(log.s, est)
    # every input token at the 5-minute write price (caching is on), all output at $15/M
    assert cached == pytest.approx((est.worst_input_tokens * 3.75 + 1000 * 15) / 1e6)
    off = Log.created(model={"anthropic": {**SONNET["anthropic"], "prompt_cache": "off"}})
    assert request_cost_bound(off.s, est) == pytest.approx(
        (est.worst_input_tokens * 3 + 15_000) / 1e6
    )


def test_a_scripted_model_is_estimated_at_what_its_next_turn_will_say() -> None:
    script = {"scripted": [{"end_turn": "x" * 400}]}
    log = Log.created(model=script)
    est = estimate_request(log.s, assemble(log.s))
    assert est.max_output_tokens >= 100
