"""The model adapter port, shaped like the Messages API so the anthropic SDK fits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agentledger.events.model_retry import ModelFailure
from agentledger.events.types import ModelErrorKind, StopReason
from agentledger.schemas.content import ContentBlock, Message, Usage
from agentledger.schemas.spec import ToolSpec


@dataclass(frozen=True, slots=True)
class ModelRequest:
    run_id: str
    turn: int
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    context_tokens: int | None = None  # the view's own size estimate, when it was assembled
    server_tools: tuple[dict[str, Any], ...] = ()  # the provider's tools, as the API defines them
    model: str | None = None  # the model to ask, when not the adapter's own (a fallback)
    tenant: str | None = None  # the tenant of the run asking (a replay plays only its own)
    # told each piece of the reply's text as it streams, when the adapter streams (the
    # web view shows it); what is recorded is the whole reply, as ever
    watch: Callable[[str], None] | None = None
    max_tokens: int | None = None  # at most this output, when less than the adapter's own
    sample: int | None = None  # an MCP server's sampling request: the run's n-th (no turn)

    def output_limit(self, own: int) -> int:
        """The `max_tokens` an adapter whose own is `own` sends."""
        return min(own, self.max_tokens) if self.max_tokens else own


@dataclass(frozen=True, slots=True)
class ModelReply:
    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage
    model: str
    # tool_use blocks whose input JSON did not arrive whole (cut by max_tokens):
    # kept in `content` with input {}, and never to be executed
    truncated_tool_use_ids: tuple[str, ...] = ()
    truncated_tool_json: tuple[tuple[str, str], ...] = ()  # (tool_use id, the raw partial JSON)
    # one line per attempt retried before this reply (an adapter that retries on its own;
    # the anthropic adapter does not: each attempt is the log's, `agentledger.events.model_retry`)
    retries: tuple[str, ...] = ()
    stop_sequence: str | None = None  # which stop sequence fired
    stop_details: dict[str, Any] | None = None  # the API's reasons (a refusal's category)


class ModelError(Exception):
    """A model request that failed, classified: its kind says whether a later
    attempt can help (`agentledger.events.model_retry`), its message is the cause in one line."""

    def __init__(
        self,
        cause: str,
        *,
        kind: ModelErrorKind,
        status: int | None = None,
        retry_after_s: float | None = None,
    ):
        self.failure = ModelFailure(kind, cause, status, retry_after_s)
        super().__init__(cause)

    @property
    def retryable(self) -> bool:
        return self.failure.retryable


class ModelAdapter(Protocol):
    def respond(self, request: ModelRequest) -> ModelReply: ...

    def claim_lease_s(self) -> float:
        """How long a model call may take before another worker may retry it."""
        ...
