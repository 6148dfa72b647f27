"""The events of an MCP server's requests to our client during a call: a model
answer it asked for (sampling), from the run's own model and counted in the
run's budget. (A person's input it asks for, elicitation, is a `RunEscalated`
with reason `tool_question`, answered by `reply`.)"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentledger.events.event_model import EventModel
from agentledger.events.model_events import StopReason
from agentledger.schemas.content import Usage


class ToolSampledModel(EventModel):
    """An MCP server asked, during call `call_id`, for a model's answer (sampling):
    the run's own model answered, within the run's budget, and its usage counts
    in the run's tokens and cost. `prompt` is what was asked (the messages as text,
    its head when long), `text` the answer."""

    type: Literal["ToolSampledModel"] = "ToolSampledModel"
    call_id: str
    server: str
    sample: int = Field(ge=1, description="the run's n-th sampling request")
    system: str | None = None
    prompt: str
    max_tokens: int = Field(ge=1)
    text: str
    stop_reason: StopReason
    model: str
    usage: Usage = Usage()
