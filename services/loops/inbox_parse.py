"""Reading an inbox entry into a message, or the reason it is refused: the size
limit, invalid UTF-8, the nesting limit (checked before any parser runs), not
JSON, the wrong shape or an unknown type. Nothing here can raise anything but
`Rejected`. Given `Specs`, a run request's spec is validated once per distinct
content (its JSON's digest): the next request of the same spec takes the spec
already validated, and the rest of the message is validated as before."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentledger.schemas.inbox import Control, InboxMessage, RunRequested
from agentledger.schemas.json_limits import MAX_MESSAGE_BYTES, TooDeep, check_depth
from agentledger.schemas.spec import RunSpec
from agentledger.services.bounded_cache import BoundedCache


@cache
def _message() -> TypeAdapter[RunRequested | Control]:
    """Built at the first parse or by `prepare`, not at import: every control
    command imports this."""
    return TypeAdapter(InboxMessage)


def prepare() -> None:
    """Build the inbox message reader now (a worker does, before its intake runs)."""
    _message()


SPECS_KEPT = 256  # distinct specs validated and kept, by the digest of their JSON
SPECS_MAX_BYTES = 16 << 20  # and their JSON at most (a scripted spec can be megabytes)


class Specs:
    """Specs already validated (frozen: shared by every request that sent them)."""

    def __init__(self, *, max_items: int = SPECS_KEPT, max_bytes: int = SPECS_MAX_BYTES):
        self._kept: BoundedCache[RunSpec] = BoundedCache(max_items=max_items, max_bytes=max_bytes)

    def validated(self, data: dict[str, Any]) -> RunRequested | Control:
        """The run request `data`, its spec taken from those validated already when
        the same spec was."""
        text = json.dumps(data["spec"], separators=(",", ":"), ensure_ascii=False)
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        spec = self._kept.get(key)
        if spec is None:
            message = _validated(data)
            if isinstance(message, RunRequested):
                self._kept.put(key, message.spec, len(text))
            return message
        return _validated({**data, "spec": spec})


class Rejected(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def parse(
    fields: dict[bytes, bytes], *, max_bytes: int = MAX_MESSAGE_BYTES, specs: Specs | None = None
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
    if specs is not None and data["type"] == "RunRequested" and isinstance(data.get("spec"), dict):
        return specs.validated(data)
    return _validated(data)


def _validated(data: dict[str, Any]) -> RunRequested | Control:
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
