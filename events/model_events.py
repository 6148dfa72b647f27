"""The events of a turn's model call: the claim, a failed request, the reply."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentledger.events.event_model import EventModel
from agentledger.schemas.content import ContentBlock, Usage
from agentledger.schemas.context import ContextDecision

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]

# what went wrong with one model request, as the adapter classified it; which of


ModelErrorKind = Literal[
    "connection",  # refused, reset, the host's name not found: nothing answered
    "timeout",  # no answer in time
    "rate_limited",  # 429
    "overloaded",  # 529
    "server_error",  # 5xx, 408, 409, an `api_error` in the stream
    "stream_broken",  # the stream stopped before the message was complete
    "authentication",  # 401: the key is wrong
    "permission",  # 403: the key may not use this model or feature
    "not_found",  # 404: no such model
    "invalid_request",  # 400 and the other 4xx: the request itself is wrong
    "request_too_large",  # 413
    "billing",  # the account cannot pay
    "malformed_reply",  # the reply broke the protocol (an unknown stop reason, a bad block)
    "not_configured",  # nothing was sent: the worker has no key, or the spec asks for what the API refuses
    "other",
]


class ModelRequested(EventModel):
    """A model worker claimed the turn's model call until `deadline_at`."""

    type: Literal["ModelRequested"] = "ModelRequested"
    turn: int = Field(ge=1)
    attempt: int = Field(ge=1)
    deadline_at: float
    context_hash: str | None = Field(default=None, description="sha256 of the view sent")
    context_tokens: int | None = Field(default=None, description="its estimated size")
    context_decisions: tuple[ContextDecision, ...] = ()
    model: str | None = Field(
        default=None,
        description="the model asked, when the spec names one (a fallback after a refusal)",
    )


class ModelRequestFailed(EventModel):
    """The turn's model request (attempt `attempt`) failed: `cause` says how, in one
    line (`connection refused at http://127.0.0.1:1`). With `retry_at` the turn is
    asked again from then on; without it the run ends (a RunFailed follows)."""

    type: Literal["ModelRequestFailed"] = "ModelRequestFailed"
    turn: int = Field(ge=1)
    attempt: int = Field(ge=1)
    kind: ModelErrorKind
    cause: str
    status: int | None = Field(default=None, description="the HTTP status, when one came")
    retry_at: float | None = Field(default=None, description="when the next attempt may start")


class ModelResponded(EventModel):
    """The model's reply to a turn's request: every content block verbatim, why it
    stopped, and the usage it was billed for."""

    type: Literal["ModelResponded"] = "ModelResponded"
    turn: int = Field(ge=1)
    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage = Usage()
    model: str
    retries: tuple[str, ...] = Field(default=(), description="API errors retried before this reply")
    stop_sequence: str | None = Field(default=None, description="which stop sequence fired")
    stop_details: dict[str, Any] | None = Field(
        default=None, description="why it stopped, as the API said (a refusal's category)"
    )
    truncated: tuple[str, ...] = Field(
        default=(),
        description="tool_use ids whose input did not arrive whole (cut off): never executed",
    )
