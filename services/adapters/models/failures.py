"""What every provider's adapter says of a failed request, whichever SDK it speaks
through (no SDK here): the kind an HTTP status means (`agentledger.events.model_retry`
says which retry), the wait its headers ask for, why nothing answered at a URL,
and a cause in one line; and `Incomplete`, a stream that ended before its reply."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from agentledger.events.types import ModelErrorKind
from agentledger.services.adapters.models.port import ModelError

CONNECT_TIMEOUT_S = 10.0  # a connection is made in seconds or not at all: its own attempt's timeout
# what an HTTP status says went wrong, and its kind (`agentledger.events.model_retry` says which retry)
BY_STATUS: dict[int, tuple[ModelErrorKind, str]] = {
    401: ("authentication", "authentication failed"),
    402: ("billing", "billing refused"),
    403: ("permission", "permission denied"),
    404: ("not_found", "not found"),
    408: ("timeout", "the API timed out"),
    409: ("server_error", "conflict"),
    413: ("request_too_large", "request too large"),
    429: ("rate_limited", "rate limited"),
    529: ("overloaded", "overloaded"),
}


class Incomplete(Exception):
    """The stream ended before the reply did: a later attempt may get it whole."""


def status_failure(status: int, kind: str, said: str, retry_after: float | None) -> ModelError:
    """An HTTP error, classified: `kind` is the API's own name for it, `said` its message."""
    default: tuple[ModelErrorKind, str] = (
        ("server_error", "server error")
        if status >= 500
        else ("invalid_request", "request refused")
    )
    ours, what = BY_STATUS.get(status, default)
    return ModelError(
        f"{what} ({status} {kind}): {said}", kind=ours, status=status, retry_after_s=retry_after
    )


def unreachable(url: str, exc: BaseException) -> str:
    """Why nothing answered at `url`, in one line."""
    causes = list(_chain(exc))
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return f"connection refused at {url}"
    unresolved = next((c for c in causes if isinstance(c, socket.gaierror)), None)
    if unresolved is not None:
        return f"cannot resolve the host of {url} ({unresolved.strerror or unresolved})"
    return f"the connection to {url} failed: {root_cause(exc)}"


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """How long an HTTP error's headers ask to wait (retry-after-ms, else retry-after)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers[name]) * scale)
        except (KeyError, ValueError):
            continue
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and at not in seen:
        seen.append(at)
        at = at.__cause__ or at.__context__
    return seen


def root_cause(exc: BaseException) -> str:
    """The innermost error of the chain, as `Type: message` on one line."""
    root = _chain(exc)[-1]
    return one_line(f"{type(root).__name__}: {root}".rstrip(": "))


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
