"""Limits an inbox message must keep before it is parsed: its size, and how deep
its JSON nests, found in a few passes of C code over the text with no recursion —
so no message, however nested, can make a parser recurse until it fails, and a
large one costs the intake milliseconds, not a Python loop over every character."""

from __future__ import annotations

from itertools import accumulate

MAX_MESSAGE_BYTES = 8 << 20  # 8 MiB by default; AGENTLEDGER_INBOX_MAX_BYTES sets it
MAX_DEPTH = 64

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256)]


class TooDeep(ValueError):
    pass


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, strings skipped: escapes
    are dropped (backslash pairs first, as a string reads them), the text is cut at
    its quotes and every other piece (the strings) left out, and only the brackets
    of the rest are walked. On JSON this is exact; on text that is not, it never
    counts less than a parser reaches before the text stops being JSON."""
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(unescaped.split('"')[::2])
    brackets = outside.encode().translate(None, _NOT_BRACKETS)
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets)), default=0))


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    if text.count("[") + text.count("{") <= limit:
        return  # cannot nest deeper than it has brackets: the common case, no scan
    if (found := json_depth(text)) > limit:
        raise TooDeep(f"JSON nested {found} deep (the limit is {limit})")
