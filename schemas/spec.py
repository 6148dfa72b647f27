"""The run spec: what a user writes by hand (YAML) to start a run, and the tool
spec a registered tool declares. Unknown keys are refused so that a typo
never silently changes what a run does."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Principal(_Spec):
    """Who the run acts for; a tool with a scope runs only if the principal holds it."""

    id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    scopes: tuple[str, ...] = ()


class Budgets(_Spec):
    """Limits that end a run in an explicit state when exhausted."""

    max_turns: int = Field(default=8, ge=1, le=10_000)


class ScriptedCall(_Spec):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)


class ScriptedTurn(_Spec):
    """One scripted model response: tool calls, or the end of the model's turn."""

    tool_use: tuple[ScriptedCall, ...] | None = None
    end_turn: str | None = None
    delay_s: float = Field(default=0.0, ge=0.0, le=600.0, description="simulated model latency")

    @model_validator(mode="after")
    def _exactly_one(self) -> ScriptedTurn:
        if (self.tool_use is None) == (self.end_turn is None):
            raise ValueError("a scripted turn has exactly one of 'tool_use' or 'end_turn'")
        if self.tool_use is not None and not self.tool_use:
            raise ValueError("'tool_use' needs at least one call")
        return self


class ScriptedModel(_Spec):
    scripted: tuple[ScriptedTurn, ...] = Field(min_length=1)


class AnthropicSettings(_Spec):
    model: str = Field(min_length=1)
    max_tokens: int = Field(default=4096, ge=1)
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    thinking: dict[str, Any] | None = None


class AnthropicModel(_Spec):
    anthropic: AnthropicSettings


def _key_tag(*keys: str) -> Discriminator:
    """Tell union members apart by which key a hand-written mapping has."""

    def tag(value: Any) -> str | None:
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if isinstance(value, dict):
            return next((k for k in keys if k in value), None)
        return None

    expected = " or ".join(repr(k) for k in keys)
    return Discriminator(
        tag, custom_error_type="missing_key", custom_error_message=f"needs a key {expected}"
    )


ModelSpec = Annotated[
    Annotated[ScriptedModel, Tag("scripted")] | Annotated[AnthropicModel, Tag("anthropic")],
    _key_tag("scripted", "anthropic"),
]


class CommandCheck(_Spec):
    """Passes when the command exits 0 in the run's workspace."""

    command: str = Field(min_length=1)
    timeout_s: float = Field(default=300.0, gt=0)


class ToolCheck(_Spec):
    """Passes when a registered read-only tool returns a value that contains `expect`."""

    tool: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    expect: Any


AcceptanceCheck = Annotated[
    Annotated[CommandCheck, Tag("command")] | Annotated[ToolCheck, Tag("tool")],
    _key_tag("command", "tool"),
]


class RunSpec(_Spec):
    task: str = Field(min_length=1)
    workspace: str | None = None
    copy_workspace: bool = Field(
        default=False, description="run in a fresh copy of `workspace` under .agentledger/"
    )
    tools: tuple[str, ...] = ()
    tool_path: tuple[str, ...] = Field(
        default=(), description="folders searched for tool modules (the spec's folder is added)"
    )
    system: str | None = None
    principal: Principal
    budgets: Budgets = Budgets()
    model: ModelSpec
    acceptance: tuple[AcceptanceCheck, ...] = ()


class ToolSpec(_Spec):
    """What a registered tool declares: its model-facing interface and its execution contract."""

    name: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    scope: str | None = None
    timeout_s: float = Field(default=30.0, gt=0)
