"""How commands answer: results on stdout (text, or JSON with `--json`: one
object, or one object a line for streams); notes and errors on stderr,
prefixed `agentledger:`. With `--json` an error is also one object on stdout,
so a script reading stdout always gets JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

# characters that are line breaks to some readers (Python's str.splitlines, JavaScript
# before ES2019) though JSON allows them raw: escaped, so one object stays one line
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def emit(obj: Any) -> None:
    """One JSON object on a line of its own, flushed (streams are read as they come)."""
    print(json.dumps(obj, ensure_ascii=False, default=str).translate(_LINE_BREAKS), flush=True)


def say(text: str) -> None:
    print(f"agentledger: {text}", file=sys.stderr, flush=True)


def say_loading(url: str, perc: float) -> None:
    """The local Redis service is still loading its AOF: the command waits for it."""
    say(f"the local Redis service at {url} is loading its AOF ({perc:.0f}% so far); waiting for it")


def fail(code: int, kind: str, message: str, as_json: bool, **extra: Any) -> int:
    """Report a failure the user can act on; returns the exit code."""
    say(f"{kind}: {message}")
    if as_json:
        emit({"error": kind, "message": message, "exit_code": code, **extra})
    return code


def shown(text: str, at_most: int = 40) -> str:
    """`text` as a message shows a value it refuses: repr, cut to `at_most` characters."""
    if len(text) <= at_most:
        return repr(text)
    return f"{text[:at_most]!r}… ({len(text):,} characters)"
