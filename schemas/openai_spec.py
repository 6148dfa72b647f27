"""An OpenAI-compatible model's part of a run spec: `model: {openai: {...}}` (OpenAI,
vLLM, Ollama, llama.cpp's server, a LiteLLM proxy: any Chat Completions server), and
the capabilities the core asks of it."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from agentledger.schemas.model_capabilities import ModelCapabilities
from agentledger.schemas.spec_base import Spec as _Spec


class OpenAISettings(_Spec):
    """A model served through the Chat Completions API. `base_url` names another
    server than OpenAI's own (a deployment lists the ones a spec may name:
    AGENTLEDGER_MODEL_ENDPOINTS) and `api_key_env` the worker variable whose value
    is its key (AGENTLEDGER_MODEL_KEY_VARS lists those; OPENAI_API_KEY when unset;
    a server that needs none is sent none). `send_reasoning`: the reasoning a
    server returned (`reasoning_content`, `reasoning`) goes back with its turn, for
    servers that require it (DeepSeek's thinking mode with tools); it is always kept.
    `api`: which of OpenAI's APIs is spoken — `auto` is the Responses API at OpenAI's
    own (its reasoning items go back with each request) and Chat Completions, the
    API every compatible server implements, elsewhere."""

    model: str = Field(min_length=1, description="the model id, as the server names it")
    api: Literal["auto", "chat", "responses"] = Field(
        default="auto",
        description="auto: the Responses API at OpenAI's own, Chat Completions elsewhere",
    )
    base_url: str | None = Field(
        default=None,
        min_length=1,
        description="the server's base URL, e.g. http://localhost:11434/v1 (default: OpenAI's own)",
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the worker variable holding the key (default OPENAI_API_KEY)",
    )
    max_tokens: int = Field(default=4096, ge=1, description="the output limit of a request")
    system: str | None = Field(default=None, description="added to the spec's own system text")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    parallel_tool_calls: bool | None = Field(
        default=None, description="sent as given: false asks for one call a turn"
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    send_reasoning: bool = Field(
        default=False, description="send each turn's reasoning back with it"
    )
    fallback_model: str | None = Field(
        default=None,
        min_length=1,
        description="gets a refused request, once, and the rest of the run",
    )

    @field_validator("base_url")
    @classmethod
    def _a_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if not url.startswith(("http://", "https://")) or any(c in url for c in " \t\n?#"):
            raise ValueError("a base URL is http(s)://host[:port][/path]")
        return url.rstrip("/")


class OpenAIModel(ModelCapabilities, _Spec):
    """A model behind an OpenAI-compatible Chat Completions server."""

    provider: ClassVar[str] = "openai"
    shape: ClassVar[str] = "{model: …, base_url: …}"
    names_model: ClassVar[bool] = True
    openai: OpenAISettings

    @property
    def model_id(self) -> str:
        return self.openai.model

    @property
    def output_limit(self) -> int | None:
        return self.openai.max_tokens

    @property
    def fallback_model(self) -> str | None:
        return self.openai.fallback_model

    @property
    def named_endpoint(self) -> str | None:
        return self.openai.base_url

    @property
    def named_key_variable(self) -> str | None:
        return self.openai.api_key_env
