"""The OpenAI-compatible adapter: any Chat Completions server (OpenAI, vLLM, Ollama,
llama.cpp's server, a LiteLLM proxy) through the official `openai` SDK's streaming
API. It is the only module that imports `openai`; its row in the providers table
(`agentledger.services.adapters.models.providers`) makes it, says where it sends
and with which key, and gives the body as sent (`openai_wire.request_params`).

Requests stream, asking for usage in the stream. What is sent and how the reply is
rebuilt from the chunks is `openai_wire` (plain JSON); here are the client and the
error taxonomy: every failure the SDK reports becomes a ModelError of one of our
kinds, with its cause in one line (`anthropic_adapter`'s status table: the HTTP
statuses mean the same). The SDK never retries (`max_retries` 0): each attempt is
recorded in the run's log and the log's rule says whether and when to try again,
within the operator's bound (`agentledger.events.model_retry`).

The endpoint and key: the spec's `base_url` (only one the deployment lists:
AGENTLEDGER_MODEL_ENDPOINTS; the intake refuses others and so does this adapter)
or OpenAI's own; the spec's `api_key_env` (only a variable the deployment lists:
AGENTLEDGER_MODEL_KEY_VARS) or OPENAI_API_KEY. A self-hosted server may need no
key: it is sent a placeholder, never another variable's value; OpenAI's own
cannot be asked without one."""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from agentledger.events.types import ModelErrorKind
from agentledger.schemas.openai_spec import OpenAIModel
from agentledger.services.adapters.models.failures import (
    CONNECT_TIMEOUT_S,
    Incomplete,
    one_line,
    retry_after_s,
    root_cause,
    status_failure,
    unreachable,
)
from agentledger.services.adapters.models.openai_responses import EventLog
from agentledger.services.adapters.models.openai_responses import to_reply as responses_reply
from agentledger.services.adapters.models.openai_wire import (
    DEFAULT_BASE_URL,
    ChunkLog,
    endpoint_of,
    is_openai_own,
    speaks_responses,
    to_reply,
    wire_body,
)
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest
from agentledger.services.settings import Settings

NO_KEY = "agentledger-no-key"  # what a server that needs no key is sent (the SDK wants one)
# what an error chunk in a 200 stream says, by its type or code; any other is the server's
BY_ERROR_TYPE: dict[str, ModelErrorKind] = {
    "rate_limit_exceeded": "rate_limited",
    "rate_limit_error": "rate_limited",
    "server_error": "server_error",
    "overloaded": "overloaded",
    "timeout": "timeout",
    "invalid_request_error": "invalid_request",
    "BadRequestError": "invalid_request",
}


class OpenAIAdapter:
    """One request per `respond`: a failure is raised as a classified ModelError and
    the turn's retries are the log's, each attempt recorded."""

    def __init__(self, spec: OpenAIModel, settings: Settings, *, timeout_s: float = 600.0):
        self._spec = spec
        self._lease_s = settings.model_lease_s
        self._timeout_s = timeout_s
        self._client: openai.OpenAI | None = None
        self._problem: ModelError | None = None
        try:
            self._url, _, variable, key = endpoint_of(spec, settings)
        except ModelError as exc:
            self._url, self._problem = spec.openai.base_url or DEFAULT_BASE_URL, exc
            return
        if key is None and is_openai_own(self._url):
            self._problem = ModelError(
                f"{variable} is not set on this worker", kind="not_configured"
            )
            return
        timeout = httpx2.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S)
        self._client = openai.OpenAI(
            api_key=key or NO_KEY, base_url=self._url, max_retries=0, timeout=timeout
        )

    def claim_lease_s(self) -> float:
        return self._lease_s

    def respond(self, request: ModelRequest) -> ModelReply:
        if self._client is None:
            assert self._problem is not None
            raise self._problem
        responses = speaks_responses(self._spec.openai, self._url)
        log: ChunkLog | EventLog = EventLog() if responses else ChunkLog()
        try:
            body = wire_body(self._spec.openai, request, base_url=self._url)
            # the body as the wire modules made it, as plain JSON: the SDK's typed methods
            # walk every message against their shapes first (~50 ms a request at 60
            # turns, growing with the conversation), which a body of plain JSON needs not
            stream = self._client.post(
                "/responses" if responses else "/chat/completions", cast_to=object,
                body=body, stream=True, stream_cls=openai.Stream[object],
            )  # fmt: skip
            with stream:
                for event in stream:
                    said = event if isinstance(event, dict) else {}
                    log.see(said)
                    if request.watch is not None and (text := _text_delta(said, responses)):
                        request.watch(text)
        except openai.APIStatusError as exc:
            raise status_error(exc) from exc
        except openai.APITimeoutError as exc:
            waited = f"{CONNECT_TIMEOUT_S:g} s to connect, {self._timeout_s:g} s a read"
            raise ModelError(
                f"no answer from {self._url} in time ({waited})", kind="timeout"
            ) from exc
        except (openai.APIConnectionError, httpx2.TransportError) as exc:
            raise self._connection_error(exc, started=log.started) from exc
        except openai.APIError as exc:  # an error chunk in a 200 stream, or the SDK's own
            raise stream_error(exc) from exc
        try:
            if isinstance(log, EventLog):
                return responses_reply(log, request)
            return to_reply(log, request)
        except Incomplete as exc:
            raise ModelError(
                f"the stream from {self._url} ended: {exc}", kind="stream_broken"
            ) from exc

    def _connection_error(self, exc: Exception, *, started: bool) -> ModelError:
        if started:
            return ModelError(
                f"the stream from {self._url} broke: {root_cause(exc)}", kind="stream_broken"
            )
        return ModelError(unreachable(self._url, exc), kind="connection")


def _said(body: object) -> dict[str, Any]:
    """The error object of a body: OpenAI's `{"error": {...}}` or vLLM's flat one."""
    if not isinstance(body, dict):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body


def _text_delta(event: dict[str, Any], responses: bool) -> str:
    """The text a stream event adds to the reply: a Responses `output_text.delta`, a
    Chat Completions chunk's `delta.content` ("" for every other event)."""
    if responses:
        found = event.get("delta") if event.get("type") == "response.output_text.delta" else ""
        return found if isinstance(found, str) else ""
    choices = event.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    delta = first.get("delta") if isinstance(first, dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""


def status_error(exc: openai.APIStatusError) -> ModelError:
    error = _said(exc.body)
    kind = str(error.get("type") or error.get("code") or "error")
    said = one_line(str(error.get("message") or exc.message))
    return status_failure(exc.status_code, kind, said, retry_after_s(exc.response.headers))


def stream_error(exc: openai.APIError) -> ModelError:
    error = _said(exc.body)
    kind = str(error.get("type") or error.get("code") or "error")
    said = one_line(str(error.get("message") or exc.message))
    return ModelError(f"{kind} mid-stream: {said}", kind=BY_ERROR_TYPE.get(kind, "server_error"))
