"""The anthropic adapter: Claude through the official SDK's streaming Messages
API. It is the only module that imports `anthropic`.

Requests always stream (the SDK refuses non-streaming calls with a large
max_tokens). What is sent and how the reply is rebuilt from the stream's raw
events is `anthropic_wire` (plain JSON, so every block goes back exactly as it
came); here are the client, the error taxonomy and the retries. The retry
policy is ours (the SDK's `max_retries` is 0) so that every retry is reported
with the reply."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import anthropic
import httpx2

from schemas.spec import AnthropicSettings
from services.adapters.models.anthropic_wire import Incomplete, StreamLog, request_params, to_reply
from services.adapters.models.port import ModelError, ModelReply, ModelRequest

DEFAULT_BASE_URL = "https://api.anthropic.com"
# SDK 2.x sends anthropic-version 2026-10-21, which refuses sampling parameters
# (even at their defaults), and has no `temperature` argument any more
NO_TEMPERATURE = (
    "the Messages API version the anthropic SDK sends refuses `temperature`; "
    "remove it from the run spec's anthropic settings"
)
RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx (529 "overloaded" included)
# error types that an `error` event in a 200 stream may carry and a retry cannot fix
CLIENT_ERROR_TYPES = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error"}
    | {"request_too_large", "billing_error"}
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_s: float = 1.0  # the first backoff; it doubles per retry, with jitter
    max_wait_s: float = 30.0  # no single wait is longer, whatever retry-after says

    def wait_s(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_wait_s, retry_after)
        backoff = self.base_s * 2.0 ** (retry - 1)
        return min(self.max_wait_s, backoff * random.uniform(0.5, 1.0))


class _Transient(Exception):
    """A failed attempt that a later attempt may get past."""

    def __init__(self, what: str, retry_after: float | None = None):
        self.what = what
        self.retry_after = retry_after
        super().__init__(what)


class AnthropicAdapter:
    def __init__(
        self,
        settings: AnthropicSettings,
        *,
        api_key: str | None,
        base_url: str | None = None,
        lease_s: float = 120.0,
        retry: RetryPolicy | None = None,
        timeout_s: float = 600.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._settings = settings
        self._lease_s = lease_s
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        # with no key the SDK would look for credentials on its own (env, profiles on disk)
        self._client = None
        if api_key:
            self._client = anthropic.Anthropic(
                api_key=api_key,
                base_url=base_url or DEFAULT_BASE_URL,
                max_retries=0,
                timeout=timeout_s,
            )

    def claim_lease_s(self) -> float:
        # the claim must outlive our own retries, or another worker re-drives the turn meanwhile
        return self._lease_s + self._retry.max_retries * self._retry.max_wait_s

    def respond(self, request: ModelRequest) -> ModelReply:
        if self._client is None:
            raise ModelError("ANTHROPIC_API_KEY is not set", retryable=False)
        if self._settings.temperature is not None:
            raise ModelError(NO_TEMPERATURE, retryable=False)
        params = request_params(self._settings, request)
        retries: list[str] = []
        while True:
            try:
                return replace(self._attempt(self._client, params), retries=tuple(retries))
            except _Transient as failure:
                if len(retries) >= self._retry.max_retries:
                    message = f"{failure.what}; gave up after {len(retries)} retries"
                    raise ModelError(message, retryable=True, retries=tuple(retries)) from failure
                wait = self._retry.wait_s(len(retries) + 1, failure.retry_after)
                retries.append(f"retry {len(retries) + 1}: {failure.what}; waited {wait:.3f}s")
                self._sleep(wait)

    def _attempt(self, client: anthropic.Anthropic, params: dict[str, Any]) -> ModelReply:
        log = StreamLog()
        try:
            with client.messages.create(**params, stream=True) as stream:
                for event in stream:
                    # the JSON as it came: blocks the SDK does not know are kept whole too
                    log.see(event.to_dict(mode="json", warnings=False))
            if log.message is None:
                raise _Transient("the stream ended before message_start")
            return to_reply(log)
        except Incomplete as exc:
            raise _Transient(str(exc)) from exc
        except anthropic.APIStatusError as exc:
            raise _status_failure(exc) from exc
        except anthropic.APIConnectionError as exc:
            raise _Transient(f"connection failed: {exc.message}") from exc
        except httpx2.TransportError as exc:  # the SDK does not wrap errors while reading a stream
            raise _Transient(f"stream broken: {exc!r}") from exc


def _status_failure(exc: anthropic.APIStatusError) -> Exception:
    """A transient failure to retry, or a ModelError carrying the API's message."""
    kind = exc.type or "error"
    message = exc.api_message or exc.message
    if exc.status_code == 200:  # an `error` event in the middle of the stream
        if kind in CLIENT_ERROR_TYPES:
            return ModelError(f"{kind} mid-stream: {message}", retryable=False)
        return _Transient(f"{kind} mid-stream (status 200): {message}")
    if exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500:
        return _Transient(f"{exc.status_code} {kind}: {message}", _retry_after(exc))
    return ModelError(f"{exc.status_code} {kind}: {message}", retryable=False)


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers[name]) * scale)
        except (KeyError, ValueError):
            continue
    return None
