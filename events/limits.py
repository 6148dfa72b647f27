"""Concurrency keys, pure: a tool's declared limits (`agentledger.schemas.limits.Limit`)
filled in for one call, the operator's limits put over them, and the slot keys a
call then asks the lock table for.

A key is shared by every run of the deployment, so a filled-in key must never let
one tenant reach a key it was not meant to, nor make keys without end: a value put
into a template (an argument the model chose, the principal's tenant) is 1–64 of
`A–Z a–z 0–9 _ . @ -` — never `:`, so the key keeps its template's segments, and
the template's first segment is literal — else the call is refused. The operator's
limits (`AGENTLEDGER_LIMITS`: a template or a filled-in key, and its max) take
precedence over the tool's: a tool author cannot raise a shared service's limit.
Slot keys are `limit:<key>` in the lock table, apart from resource names."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentledger.schemas.limits import KEY_TEMPLATE, MAX_KEY_CHARS, Limit

SLOT_PREFIX = "limit:"
_VALUE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_TEMPLATE = re.compile(KEY_TEMPLATE)
_FIELD = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
Limits = tuple[tuple[str, int], ...]  # (filled-in key, max), sorted by key


class LimitError(ValueError):
    """A key that cannot be filled in for this call: the call is refused, saying why."""


def fill(template: str, args: Mapping[str, Any], tenant: str) -> str:
    """The key `template` names for a call with `args` by a principal of `tenant`."""
    out: list[str] = []
    for segment in template.split(":"):
        found = _FIELD.match(segment)
        if found is None:
            out.append(segment)
            continue
        name = found.group(1)
        if name == "tenant":
            value: Any = tenant
        elif name in args:
            value = args[name]
        else:
            raise LimitError(f"limit key {template!r}: the call has no argument {name!r}")
        out.append(_value(template, name, value))
    return ":".join(out)


def _value(template: str, name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        kind = type(value).__name__
        raise LimitError(f"limit key {template!r}: {name!r} is a {kind}, not a string or integer")
    text = str(value)
    if not _VALUE.match(text):
        raise LimitError(
            f"limit key {template!r}: {name!r} is {text[:80]!r}: a key's value is 1-64 of "
            "letters, digits, '_', '.', '@', '-'"
        )
    return text


def resolve(
    declared: Sequence[Limit], args: Mapping[str, Any], tenant: str, operator: Mapping[str, int]
) -> Limits:
    """Each declared key filled in, with its max: the operator's for the filled-in key,
    else the operator's for the template, else the tool's. A key named twice keeps the
    smaller max."""
    out: dict[str, int] = {}
    for limit in declared:
        key = fill(limit.key, args, tenant)
        most = operator.get(key, operator.get(limit.key, limit.max))
        out[key] = min(most, out.get(key, most))
    return tuple(sorted(out.items()))


def slot_key(key: str) -> str:
    return SLOT_PREFIX + key


def slot_limits(limits: Iterable[tuple[str, int]]) -> dict[str, int]:
    """The lock table's slot keys of a call and their max."""
    return {slot_key(k): m for k, m in limits}


def parse_operator_limits(text: str) -> dict[str, int]:
    """`KEY=MAX,KEY=MAX` (a key a template or a filled-in key); a bad entry raises
    ValueError naming it."""

    def check(key: str) -> None:
        if len(key) > MAX_KEY_CHARS or not _TEMPLATE.match(key):
            raise ValueError(f"{key!r} is not a limit key (e.g. svc:payments, tenant:{{tenant}}:x)")

    return parse_key_max(text, check, what="KEY=MAX")


def parse_key_max(text: str, check: Callable[[str], None], *, what: str) -> dict[str, int]:
    """`KEY=MAX,KEY=MAX` with each key passed to `check` (which raises ValueError for a
    bad one) and each max a whole number of at least 1; a bad entry raises ValueError
    naming it (`what` is the form shown)."""
    out: dict[str, int] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        key, sep, raw = entry.rpartition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{entry!r} is not {what}")
        check(key)
        try:
            most = int(raw)
        except ValueError:
            raise ValueError(f"{entry!r}: {raw.strip()!r} is not a whole number") from None
        if most < 1:
            raise ValueError(f"{entry!r}: the max must be at least 1")
        out[key] = most
    return out
