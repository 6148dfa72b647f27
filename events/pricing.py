"""Model prices in US dollars per million tokens, and the cost of a usage.

The defaults are list prices at the time of writing; a run spec overrides or
adds models under `budgets.prices`. A model with no known price costs nothing
here, which is why a spec with a cost budget must price its models (the spec
check refuses one that does not)."""

from __future__ import annotations

from collections.abc import Mapping

from schemas.content import Usage
from schemas.spec import Price

DEFAULT_PRICES: Mapping[str, Price] = {
    "claude-opus-4-1": Price(input=15.0, output=75.0, cache_read=1.5, cache_write=18.75),
    "claude-opus-4": Price(input=15.0, output=75.0, cache_read=1.5, cache_write=18.75),
    "claude-sonnet-4-5": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
    "claude-sonnet-4": Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
    "claude-haiku-4-5": Price(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25),
    "claude-3-5-haiku": Price(input=0.8, output=4.0, cache_read=0.08, cache_write=1.0),
}


def price_of(model: str, overrides: Mapping[str, Price]) -> Price | None:
    """Exact id first, then the longest known prefix (ids carry a date suffix)."""
    table = {**DEFAULT_PRICES, **overrides}
    if model in table:
        return table[model]
    prefixes = [k for k in table if model.startswith(k)]
    return table[max(prefixes, key=len)] if prefixes else None


def cost_usd(usage: Usage, price: Price | None) -> float:
    if price is None:
        return 0.0
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_input_tokens * price.cache_read
        + usage.cache_creation_input_tokens * price.cache_write
    ) / 1_000_000
