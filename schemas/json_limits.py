"""Limits an inbox message must keep before it is parsed: its size, and how deep
its JSON nests, found by one pass over the text with no recursion — so no
message, however nested, can make a parser recurse until it fails."""

from __future__ import annotations

MAX_MESSAGE_BYTES = 8 << 20  # 8 MiB by default; AGENTLEDGER_INBOX_MAX_BYTES sets it
MAX_DEPTH = 64


class TooDeep(ValueError):
    pass


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text` (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    if text.count("[") + text.count("{") <= limit:
        return  # cannot nest deeper than it has brackets: the common case, no scan
    if (found := json_depth(text)) > limit:
        raise TooDeep(f"JSON nested {found} deep (the limit is {limit})")
