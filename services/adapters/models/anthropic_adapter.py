"""The anthropic adapter: Claude through the official SDK's streaming Messages
API. It is the only module that imports `anthropic`.

Requests always stream (the SDK refuses non-streaming calls with a large
max_tokens). What is sent and how the reply is rebuilt from the stream's raw
events is `anthropic_wire` (plain JSON, so every block goes back exactly as it
came); here are the client and the error taxonomy: every failure the SDK
reports becomes a ModelError of one of our kinds (`agentledger.events.types.ModelErrorKind`)
with its cause in one line. The SDK never retries (`max_retries` is 0): each
attempt is recorded in the run's log, and whether and when to try again is
`agentledger.events.model_retry`'s rule, within the operator's bound.

It reads the API's error message from the response body (SDK 2.x's `api_message`
is not in 1.x) and catches httpx2's transport errors (1.x does not wrap errors
while reading a stream): the floor in pyproject.toml is the oldest SDK this holds
for, and `make test-floors` runs the adapter's tests with it."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from agentledger.events.types import ModelErrorKind
from agentledger.schemas.spec import AnthropicSettings
from agentledger.services.adapters.models.anthropic_wire import (
    DEFAULT_BASE_URL,
    StreamLog,
    request_params,
    to_reply,
)
from agentledger.services.adapters.models.failures import (
    CONNECT_TIMEOUT_S,
    Incomplete,
    one_line,
    retry_after_s,
    root_cause,
    status_failure,
    unreachable,
)
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest

# SDK 2.x sends anthropic-version 2026-10-21, which refuses sampling parameters
# (even at their defaults), and has no `temperature` argument any more
NO_TEMPERATURE = (
    "the Messages API version the anthropic SDK sends refuses `temperature`; "
    "remove it from the run spec's anthropic settings"
)
# what an `error` event in a 200 stream says, by its type; any other type is the server's
BY_ERROR_TYPE: dict[str, ModelErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "server_error",
    "timeout_error": "timeout",
    "authentication_error": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "invalid_request_error": "invalid_request",
    "request_too_large": "request_too_large",
    "billing_error": "billing",
}


class AnthropicAdapter:
    """One request per `respond`: a failure is raised as a classified ModelError
    (its cause in one line, naming the URL when nothing answered) and the turn's
    retries are the log's (`agentledger.events.model_retry`), each attempt recorded."""

    def __init__(
        self,
        settings: AnthropicSettings,
        *,
        api_key: str | None,
        base_url: str | None = None,
        lease_s: float = 240.0,
        timeout_s: float = 600.0,
    ):
        self._settings = settings
        self._lease_s = lease_s
        self._url = base_url or DEFAULT_BASE_URL
        self._timeout_s = timeout_s
        # with no key the SDK would look for credentials on its own (env, profiles on disk)
        self._client = None
        if api_key:
            # a connection is made in seconds or not at all: a silent address is a
            # timeout of its own attempt, not a wait of `timeout_s`
            timeout = httpx2.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S)
            self._client = anthropic.Anthropic(
                api_key=api_key, base_url=self._url, max_retries=0, timeout=timeout
            )

    def claim_lease_s(self) -> float:
        return self._lease_s  # one request: another worker asks again only after this

    def respond(self, request: ModelRequest) -> ModelReply:
        client = self._configured()
        log = StreamLog()
        try:
            self._stream(client, request, log)
        except anthropic.APIStatusError as exc:
            raise status_error(exc) from exc
        except anthropic.APITimeoutError as exc:
            waited = f"{CONNECT_TIMEOUT_S:g} s to connect, {self._timeout_s:g} s a read"
            raise ModelError(
                f"no answer from {self._url} in time ({waited})", kind="timeout"
            ) from exc
        except anthropic.APIConnectionError as exc:  # SDK 2.x wraps a broken stream in one too
            raise self._connection_error(exc, started=log.message is not None) from exc
        except httpx2.TransportError as exc:  # SDK 1.x does not wrap errors while reading a stream
            raise self._connection_error(exc, started=log.message is not None) from exc
        except anthropic.APIError as exc:  # anything else the SDK reports: not ours to retry
            raise ModelError(
                f"the SDK failed: {type(exc).__name__}: {one_line(str(exc))}", kind="other"
            ) from exc
        return self._reply(log)

    def _configured(self) -> anthropic.Anthropic:
        """The client, or ModelError when this worker cannot send the request at all."""
        if self._client is None:
            raise ModelError("ANTHROPIC_API_KEY is not set on this worker", kind="not_configured")
        if self._settings.temperature is not None:
            raise ModelError(NO_TEMPERATURE, kind="not_configured")
        return self._client

    def _stream(self, client: anthropic.Anthropic, request: ModelRequest, log: StreamLog) -> None:
        stream = client.messages.create(**request_params(self._settings, request), stream=True)
        with stream:
            for event in stream:
                # the JSON as it came: blocks the SDK does not know are kept whole too
                said = event.to_dict(mode="json", warnings=False)
                log.see(said)
                if request.watch is not None and (text := _text_delta(said)):
                    request.watch(text)

    def _reply(self, log: StreamLog) -> ModelReply:
        if log.message is None:
            raise ModelError(
                f"the stream from {self._url} ended before message_start", kind="stream_broken"
            )
        try:
            return to_reply(log)
        except Incomplete as exc:
            raise ModelError(str(exc), kind="stream_broken") from exc

    def _connection_error(self, exc: Exception, *, started: bool) -> ModelError:
        if started:
            return ModelError(
                f"the stream from {self._url} broke: {root_cause(exc)}", kind="stream_broken"
            )
        return ModelError(unreachable(self._url, exc), kind="connection")


def _text_delta(event: dict[str, Any]) -> str:
    """The text a stream event adds to the reply ("" for every other event)."""
    delta = event.get("delta") if event.get("type") == "content_block_delta" else None
    if isinstance(delta, dict) and delta.get("type") == "text_delta":
        return str(delta.get("text") or "")
    return ""


def status_error(exc: anthropic.APIStatusError) -> ModelError:
    """An HTTP error (or an `error` event in a 200 stream), classified, with the API's message."""
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    found = body.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    kind = str(getattr(exc, "type", None) or error.get("type") or "error")
    said = one_line(str(error.get("message") or exc.message))
    status = exc.status_code
    if status == 200:  # an `error` event in the middle of the stream
        return ModelError(
            f"{kind} mid-stream: {said}", kind=BY_ERROR_TYPE.get(kind, "server_error")
        )
    return status_failure(status, kind, said, retry_after_s(exc.response.headers))
