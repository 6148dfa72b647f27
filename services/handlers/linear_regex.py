"""Regular expressions a user writes (a file check's `matches:`), matched in
time linear in the text through RE2: no pattern can hold a worker's process (and
its GIL: heartbeats, lease renewals, the intake) the way a backtracking `re`
does on `(a+)+$`. RE2 refuses what cannot be matched in linear time —
backreferences (`\\1`), lookaround (`(?=`, `(?<!`), atomic groups, possessive
repetition, `\\Z` — so such a pattern is a spec problem, found when the spec is
read, never at acceptance time.

One difference from `re` is smoothed over: `$` without `(?m)` also matches
before a final newline in Python (`done$` finds "done\\n"), which RE2's does not,
so a text that ends with a newline is also searched without it."""

from __future__ import annotations

from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each refused pattern to the worker's stderr


class BadPattern(ValueError):
    """A pattern RE2 cannot compile: invalid, or not matchable in linear time."""


def compiled(pattern: str) -> Any:
    """The compiled pattern (the re2 module keeps recently compiled ones); BadPattern
    naming what RE2 found wrong."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise BadPattern(_reason(exc)) from None
    except (TypeError, ValueError) as exc:
        raise BadPattern(str(exc)) from None


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be used (None: it can)."""
    try:
        compiled(pattern)
    except BadPattern as exc:
        return str(exc)
    return None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` is found in `text`, as `re.search` would find it (see the module)."""
    p = compiled(pattern)
    if p.search(text) is not None:
        return True
    return text.endswith("\n") and p.search(text[:-1]) is not None


def _reason(exc: Exception) -> str:
    said = exc.args[0] if exc.args else exc
    text = said.decode(errors="replace") if isinstance(said, bytes) else str(said)
    unsupported = ("invalid perl operator", "invalid escape sequence", "bad repetition operator")
    if text.startswith(unsupported):
        return (
            f"{text}: not a regex RE2 can match in linear time (no backreferences, "
            "lookaround, atomic groups or possessive repeats)"
        )
    kind, _, where = text.partition(": ")
    plain = _PLAIN.get(kind)
    return f"not a valid regex: {plain.format(where) if plain else text}"


# RE2's own words for a pattern it cannot parse, as a person would say them
_PLAIN = {
    "missing ]": "a '[' is never closed with ']' ({})",
    "missing )": "a '(' is never closed with ')' ({})",
    "unexpected )": "a ')' closes no '(' ({})",
    "trailing \\": "it ends with a lone backslash (write \\\\ for a backslash)",
    "no argument for repetition operator": "{} repeats nothing: put what it repeats before it",
    "invalid repetition size": "the count {} is not a valid repeat (n <= m, at most 1000)",
    "invalid character class range": "{} is not a valid range or class inside [...]",
    "invalid character class": "{} is not a valid class inside [...]",
    "invalid named capture group": "{} is not a valid group name",
    "invalid UTF-8": "it is not valid UTF-8",
    "pattern too large - compile failed": "it is too large for RE2 (fewer or smaller repeat counts)",
}
