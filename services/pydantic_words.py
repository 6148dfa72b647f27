"""Pydantic's validation errors in a person's words: "must be a whole number;
got 'lots'" instead of "Input should be a valid integer, unable to parse string
as an integer". One error at a time, without its path (the caller says where:
the spec's own path, a tool input's field)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import ErrorDetails

from agentledger.events.counted import counted


def plain_reason(err: ErrorDetails, *, given: str = "; got ") -> str:
    """Why the value was refused, then `given` and the value (cut to 60 characters)."""
    kind, got = err["type"], shown(err.get("input"))
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown key"
    if (plain := _PLAIN.get(kind)) is not None:
        return f"{plain(err.get('ctx') or {})}{given}{got}"
    if kind in ("value_error", "assertion_error"):  # a validator's own words
        return err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{reworded(err['msg'])}{given}{got}"


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def reworded(message: str) -> str:
    """A message of a kind not translated here, in words closer to ours."""
    for theirs, ours in _REWORDED:
        message = message.replace(theirs, ours)
    return message


_REWORDED = (
    ("Input should be", "must be"), ("should be", "must be"), ("Field required", "required"),
    ("Extra inputs are not permitted", "unknown key"), ("a valid dictionary", "a mapping"),
    ("a valid string", "text"), ("a valid list", "a list"), ("a valid tuple", "a list"),
)  # fmt: skip


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _at_least(ctx: dict[str, Any], noun: str) -> str:
    return f"needs at least {counted(ctx.get('min_length', 1), noun)}"


# the error kinds a spec author or a tool's caller meets, in plain words (ctx: their details)
_PLAIN: dict[str, Callable[[dict[str, Any]], str]] = {
    "string_type": lambda c: "must be text",
    "int_type": lambda c: "must be a whole number",
    "int_parsing": lambda c: "must be a whole number",
    "int_from_float": lambda c: "must be a whole number",
    "float_type": lambda c: "must be a number",
    "float_parsing": lambda c: "must be a number",
    "finite_number": lambda c: "must be a finite number",
    "bool_type": lambda c: "must be true or false",
    "bool_parsing": lambda c: "must be true or false",
    "dict_type": lambda c: "must be a mapping ({key: value, …})",
    "model_type": lambda c: "must be a mapping ({key: value, …})",
    "model_attributes_type": lambda c: "must be a mapping ({key: value, …})",
    "list_type": lambda c: "must be a list",
    "tuple_type": lambda c: "must be a list",
    "greater_than_equal": lambda c: f"must be at least {_number(c.get('ge'))}",
    "greater_than": lambda c: f"must be more than {_number(c.get('gt'))}",
    "less_than_equal": lambda c: f"must be at most {_number(c.get('le'))}",
    "less_than": lambda c: f"must be less than {_number(c.get('lt'))}",
    "literal_error": lambda c: f"must be {c.get('expected')}",
    "enum": lambda c: f"must be {c.get('expected')}",
    "string_pattern_mismatch": lambda c: f"must match the pattern {c.get('pattern')!r}",
    "string_too_short": lambda c: (
        "must not be empty" if c.get("min_length") == 1 else _at_least(c, "character")
    ),
    "string_too_long": lambda c: f"takes at most {counted(c.get('max_length', 0), 'character')}",
    "too_short": lambda c: _at_least(c, "item"),
    "too_long": lambda c: f"takes at most {counted(c.get('max_length', 0), 'item')}",
}
