"""Reading an inbox entry into a message, or the reason it is refused: the size
limit, invalid UTF-8, the nesting limit (checked before any parser runs), not
JSON, the wrong shape or an unknown type. Nothing here can raise anything but
`Rejected`."""

from __future__ import annotations

import json
from functools import cache

from pydantic import TypeAdapter, ValidationError

from agentledger.schemas.inbox import Control, InboxMessage, RunRequested
from agentledger.schemas.json_limits import MAX_MESSAGE_BYTES, TooDeep, check_depth


@cache
def _message() -> TypeAdapter[RunRequested | Control]:
    """Built at the first parse or by `prepare`, not at import: every control
    command imports this."""
    return TypeAdapter(InboxMessage)


def prepare() -> None:
    """Build the inbox message reader now (a worker does, before its intake runs)."""
    _message()


class Rejected(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def parse(
    fields: dict[bytes, bytes], *, max_bytes: int = MAX_MESSAGE_BYTES
) -> RunRequested | Control:
    raw = fields.get(b"message")
    if raw is None:
        raise Rejected("no 'message' field")
    check_size(raw, max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(f"message is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        check_depth(text)
        data = json.loads(text)
    except TooDeep as exc:
        raise Rejected(f"message is {exc}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise Rejected(f"message is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Rejected(f"message is a JSON {type(data).__name__}, not an object")
    if data.get("type") not in _TYPES:
        raise Rejected(f"unknown message type {data.get('type')!r}; known: {', '.join(_TYPES)}")
    try:
        return _message().validate_python(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or '(message)'}: {e['msg']}"
            for e in exc.errors()[:5]
        ]
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise Rejected("; ".join(problems) + more) from None


def check_size(raw: bytes, max_bytes: int) -> None:
    if len(raw) > max_bytes:
        raise Rejected(f"message is {len(raw):,} bytes; the limit is {max_bytes:,}")


_TYPES = (
    "RunRequested",
    "RunCancelRequested",
    "ApprovalGranted",
    "ApprovalDenied",
    "HumanReplied",
    "RunResumed",
    "RunAborted",
)
