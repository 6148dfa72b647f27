"""Claude's part of a run spec: `model: {anthropic: {...}}` and the capabilities the
core asks of it."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentledger.schemas.model_build import deferred
from agentledger.schemas.model_capabilities import ModelCapabilities
from agentledger.schemas.spec_base import Spec as _Spec


class ServerTool(BaseModel):
    """A server tool, as the Messages API defines it: `type` (versioned, e.g.
    `web_search_20250305`), `name`, and its own options, passed through unchanged."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=deferred())
    type: str = Field(min_length=1, pattern=r"^[a-z][a-z0-9_]*$")
    name: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9_-]{1,64}$")

    def definition(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class AnthropicSettings(_Spec):
    """Claude through the Messages API. `server_tools` are passed through as the
    API defines them (`{type: web_search_20250305, name: web_search, max_uses: 5}`):
    the provider runs them, our executor never does. `prompt_cache`: `breakpoints`
    (cache_control on the tools, the system text and the conversation's last
    blocks), `automatic` (one top-level cache_control; the API places it) or
    `off`. `fallback_model`: after a refusal the refused request is sent again,
    without the refused turn, to this model, which then serves the rest of the run."""

    model: str = Field(min_length=1, description="the model id")
    max_tokens: int = Field(default=4096, ge=1, description="the output limit of a request")
    system: str | None = Field(default=None, description="added to the spec's own system text")
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    thinking: dict[str, Any] | None = Field(
        default=None, description="passed through as the API defines it, e.g. {type: adaptive}"
    )
    server_tools: tuple[ServerTool, ...] = Field(
        default=(), description="run by the provider, passed through as the API defines them"
    )
    prompt_cache: Literal["breakpoints", "automatic", "off"] = "breakpoints"
    cache_ttl: Literal["5m", "1h"] = Field(
        default="5m", description="1h: cache writes cost 2x input instead of 1.25x"
    )
    fallback_model: str | None = Field(
        default=None,
        min_length=1,
        description="gets a refused request, once, and the rest of the run",
    )

    @model_validator(mode="after")
    def _server_tool_names_unique(self) -> AnthropicSettings:
        names = [t.name for t in self.server_tools]
        if dupes := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"server tool names must be unique: {dupes}")
        return self


class AnthropicModel(ModelCapabilities, _Spec):
    """Claude through the Messages API (ANTHROPIC_API_KEY)."""

    provider: ClassVar[str] = "anthropic"
    shape: ClassVar[str] = "{model: …}"
    names_model: ClassVar[bool] = True
    anthropic: AnthropicSettings

    @property
    def model_id(self) -> str:
        return self.anthropic.model

    @property
    def output_limit(self) -> int | None:
        return self.anthropic.max_tokens

    @property
    def fallback_model(self) -> str | None:
        return self.anthropic.fallback_model

    @property
    def caching(self) -> tuple[str, str]:
        return self.anthropic.prompt_cache, self.anthropic.cache_ttl

    def server_tool_definitions(self) -> tuple[dict[str, Any], ...]:
        return tuple(t.definition() for t in self.anthropic.server_tools)

    def problems(self) -> tuple[tuple[str, str], ...]:
        if self.anthropic.temperature is not None:
            reason = "the Messages API version the anthropic SDK sends refuses sampling parameters"
            return (("model.anthropic.temperature", reason),)
        return ()
