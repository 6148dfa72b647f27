"""Model prices in US dollars per million tokens, and the cost of one reply's usage.

The defaults are Anthropic's list prices for the Claude API, checked on
2026-12-01, and OpenAI's as published in August 2025 (not checked since) (docs/reference/prices.md is made from this table); a run spec overrides or adds models
under `budgets.prices`. Cache reads, 5-minute and 1-hour cache writes are
priced apart; a model priced by prompt length (Haiku 5.5) bills every token of
a long-prompt request at its higher price; web searches cost per thousand. A
model with no known price costs nothing here, which is why a spec with a cost
budget must price its models (the spec check refuses one that does not)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from agentledger.schemas.content import Usage
from agentledger.schemas.spec import Price, RunSpec

PRICES_CHECKED = "2026-12-01"
# OpenAI's list prices as published in August 2025, not checked since (this machine has no
# way to): its cached input is read at a discount and written at the input price
OPENAI_PRICES_AS_OF = "2025-08"


def _p(inp: float, out: float, read: float, write_5m: float, write_1h: float) -> Price:
    return Price(
        input=inp, output=out, cache_read=read, cache_write=write_5m, cache_write_1h=write_1h
    )


_FABLE_5_1 = _p(10.0, 50.0, 0.25, 12.5, 20.0)
_FABLE_5 = _p(10.0, 50.0, 1.0, 12.5, 20.0)
_OPUS_5 = _p(5.0, 25.0, 0.5, 6.25, 10.0)
_OPUS_4 = _p(15.0, 75.0, 1.5, 18.75, 30.0)
_SONNET_4 = _p(3.0, 15.0, 0.3, 3.75, 6.0)
_HAIKU_5_5 = _p(0.10, 0.50, 0.01, 0.125, 0.20).model_copy(
    update={"long_prompt_over": 100_000, "long_prompt": _p(0.50, 2.50, 0.05, 0.625, 1.0)}
)


def _o(inp: float, out: float, read: float) -> Price:
    return _p(inp, out, read, inp, inp)


DEFAULT_PRICES: Mapping[str, Price] = {
    "claude-fable-5-2": _p(8.0, 40.0, 0.20, 10.0, 16.0),
    "claude-fable-5-1": _FABLE_5_1,
    "claude-mythos-5-1": _FABLE_5_1,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-opus-5-5": _p(4.0, 20.0, 0.20, 5.0, 8.0),
    "claude-opus-5": _OPUS_5,
    "claude-opus-4-8": _OPUS_5,
    "claude-opus-4-7": _OPUS_5,
    "claude-opus-4-6": _OPUS_5,
    "claude-opus-4-5": _OPUS_5,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-sonnet-5-5": _p(2.0, 10.0, 0.10, 2.5, 4.0),
    "claude-sonnet-5": _p(2.0, 10.0, 0.20, 2.5, 4.0),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4": _SONNET_4,
    "claude-haiku-5-5": _HAIKU_5_5,
    "claude-haiku-4-5": _p(1.0, 5.0, 0.10, 1.25, 2.0),
    "claude-3-5-haiku": _p(0.8, 4.0, 0.08, 1.0, 1.6),
    "claude-haiku-3-5": _p(0.8, 4.0, 0.08, 1.0, 1.6),
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30, 0.50),
    # OpenAI's (OPENAI_PRICES_AS_OF)
    "gpt-5": _o(1.25, 10.0, 0.125),
    "gpt-5-mini": _o(0.25, 2.0, 0.025),
    "gpt-5-nano": _o(0.05, 0.40, 0.005),
    "gpt-4.1": _o(2.0, 8.0, 0.50),
    "gpt-4.1-mini": _o(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _o(0.10, 0.40, 0.025),
    "gpt-4o": _o(2.50, 10.0, 1.25),
    "gpt-4o-mini": _o(0.15, 0.60, 0.075),
    "o3": _o(2.0, 8.0, 0.50),
    "o4-mini": _o(1.10, 4.40, 0.275),
}


def price_of(model: str, overrides: Mapping[str, Price]) -> Price | None:
    """Exact id first, then the longest known prefix (ids may carry a date suffix)."""
    if not overrides:  # the common case, asked at every reply folded: looked up once per model
        return _default_price(model)
    return _lookup(model, {**DEFAULT_PRICES, **overrides})


@lru_cache(maxsize=256)
def _default_price(model: str) -> Price | None:
    return _lookup(model, DEFAULT_PRICES)


def _lookup(model: str, table: Mapping[str, Price]) -> Price | None:
    key = _key(model, table)
    return table[key] if key is not None else None


def _key(model: str, table: Mapping[str, Price]) -> str | None:
    """The entry that prices `model`: its exact id, else its longest known prefix."""
    if model in table:
        return model
    prefixes = [k for k in table if model.startswith(k)]
    return max(prefixes, key=len) if prefixes else None


def with_operator_prices(spec: RunSpec, operator: Mapping[str, Price]) -> RunSpec:
    """The spec with the operator's price of each model it names (its model and its
    fallback) that the spec does not price itself, written into `budgets.prices`:
    the run's log then says what it was priced at. The spec's own prices win over
    the operator's, and the operator's over the built-in table."""
    own = spec.budgets.prices
    added = {
        key: operator[key]
        for model in (spec.model.model_id, spec.model.fallback_model)
        if model is not None
        and _key(model, own) is None
        and (key := _key(model, operator)) is not None
    }
    if not added:
        return spec
    budgets = spec.budgets.model_copy(update={"prices": {**own, **added}})
    return spec.model_copy(update={"budgets": budgets})


def cost_usd(usage: Usage, price: Price | None) -> float:
    """The cost of one reply (tiers depend on the request, so price replies one by one)."""
    if price is None:
        return 0.0
    prompt = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    if price.long_prompt is not None and price.long_prompt_over is not None:
        if prompt > price.long_prompt_over:
            price = price.long_prompt.model_copy(
                update={"web_search_per_1k": price.web_search_per_1k}
            )
    tokens = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_input_tokens * price.cache_read
        + usage.cache_creation_5m_input_tokens * price.cache_write
        + usage.cache_creation_1h_input_tokens * price.one_hour_write
    ) / 1_000_000
    searches = usage.server_tool_use.get("web_search_requests", 0)
    return tokens + searches * price.web_search_per_1k / 1000


def worst_input_rate(price: Price, *, caching: str, ttl: str, prompt_tokens: int) -> float:
    """$ per million of the dearest way an input token of a request can be billed."""
    if price.long_prompt is not None and price.long_prompt_over is not None:
        if prompt_tokens > price.long_prompt_over:
            price = price.long_prompt
    if caching == "off":
        return price.input
    write = price.one_hour_write if ttl == "1h" else price.cache_write
    return max(price.input, write)


def output_rate(price: Price, *, prompt_tokens: int) -> float:
    if price.long_prompt is not None and price.long_prompt_over is not None:
        if prompt_tokens > price.long_prompt_over:
            return price.long_prompt.output
    return price.output
