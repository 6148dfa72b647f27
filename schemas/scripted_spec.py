"""The scripted model of a run spec: turns played in order, no API and no key (for
examples, tests, and a flow's deterministic stages). Re-exported by `agentledger.schemas.spec`."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from agentledger.schemas.content import TextBlock, ToolUseBlock
from agentledger.schemas.model_capabilities import ModelCapabilities
from agentledger.schemas.spec_base import Spec as _Spec


class ScriptedCall(_Spec):
    """One tool call of a scripted turn, as a `tool_use` block."""

    id: str = Field(min_length=1, description="the call id")
    name: str = Field(min_length=1, description="the tool")
    input: dict[str, Any] = Field(default_factory=dict, description="its arguments")


class ScriptedTurn(_Spec):
    """One scripted model response: tool calls, or the end of the model's turn."""

    tool_use: tuple[ScriptedCall, ...] | None = Field(default=None, description="calls to propose")
    end_turn: str | None = Field(
        default=None, description="the final text: the model ends its turn"
    )
    refusal: str | None = Field(default=None, description="a refusal, with this text")
    stop_reason: Literal["max_tokens", "pause_turn", "stop_sequence"] | None = Field(
        default=None, description="play a reply that stopped this way instead"
    )
    delay_s: float = Field(default=0.0, ge=0.0, le=600.0, description="simulated model latency")

    @model_validator(mode="after")
    def _exactly_one(self) -> ScriptedTurn:
        given = [k for k in ("tool_use", "end_turn", "refusal") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "a scripted turn has exactly one of 'tool_use', 'end_turn' or 'refusal'"
            )
        if self.tool_use is not None and not self.tool_use:
            raise ValueError("'tool_use' needs at least one call")
        return self


class ScriptedModel(ModelCapabilities, _Spec):
    """A model that plays its turns in order (no API, no key): for examples and tests.
    A request for a turn it does not have ends the run `failed`."""

    provider: ClassVar[str] = "agentledger.scripted"
    shape: ClassVar[str] = "[turns]"
    scripted: tuple[ScriptedTurn, ...] = Field(min_length=1, description="the turns, in order")
    sampled: tuple[str, ...] = Field(
        default=(),
        description="its answers to MCP servers' sampling requests, in the order they come",
    )
    counted: bool = Field(
        default=True,
        description="false: its replies count no tokens (a flow's deterministic stage, "
        "whose scripted turns stand for no model)",
    )

    def output_after(self, turns_done: int) -> int | None:
        """What it will say next, counted as it counts it (~4 chars a token)."""
        if turns_done >= len(self.scripted):
            return 1
        turn = self.scripted[turns_done]
        if turn.tool_use is not None:
            blocks: list[dict[str, object]] = [
                ToolUseBlock(id=c.id, name=c.name, input=c.input).model_dump()
                for c in turn.tool_use
            ]
        else:
            text = turn.refusal if turn.refusal is not None else turn.end_turn or ""
            blocks = [TextBlock(text=text).model_dump()]
        return max(1, len(json.dumps(blocks)) // 4)
