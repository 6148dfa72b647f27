"""Content blocks shaped like the Anthropic Messages API, as a tagged union.

The run log keeps every block the model sent verbatim, so a conversation can
be sent back exactly as it came: thinking signatures, `citations` on text,
`caller` on tool_use, and every block we do not act on ourselves — server tool
uses and their results (web search, web fetch, code execution), `compaction`,
`fallback`, and any type the API adds later — kept as the API's own JSON in a
`ProviderBlock`. Fields the API adds to a known block are kept too (extra
fields are allowed on the model's blocks). `to_api` is the one function that
turns a block into what the API is sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from agentledger.schemas.model_build import deferred


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())


class _ModelBlock(BaseModel):
    """A block the model sends: fields the API adds later are kept as they came."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=deferred())


class TextBlock(_ModelBlock):
    type: Literal["text"] = "text"
    text: str
    citations: tuple[dict[str, Any], ...] | None = Field(
        default=None, description="the sources of the text, as the API sent them"
    )


class ToolUseBlock(_ModelBlock):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]
    caller: dict[str, Any] | None = Field(default=None, description="who made the call")


ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]


class ImageData(_Block):
    media_type: ImageType
    data: str = Field(description="the image, base64")


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False
    images: tuple[ImageData, ...] = Field(
        default=(), description="images the tool answered with, sent after its text"
    )


class ThinkingBlock(_ModelBlock):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


class RedactedThinkingBlock(_ModelBlock):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ProviderBlock(_ModelBlock):
    """Any other block the API sends, kept as its own JSON and sent back unchanged:
    server tool uses and results (executed by the provider, never by us),
    compaction, fallback, and types that do not exist yet."""

    type: str = Field(min_length=1)

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def is_server_tool_use(self) -> bool:
        return self.type == "server_tool_use" or self.type.endswith("_tool_use")

    @property
    def tool_use_id(self) -> str | None:
        """The server tool use a result block answers."""
        value = self.fields.get("tool_use_id")
        return value if isinstance(value, str) else None


KNOWN_TYPES = frozenset({"text", "tool_use", "tool_result", "thinking", "redacted_thinking"})


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in KNOWN_TYPES else "provider"


ContentBlock = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")]
    | Annotated[ProviderBlock, Tag("provider")],
    Discriminator(_block_tag),
]

_OPTIONAL = ("citations", "caller")  # absent rather than null when the API did not send them


def to_api(b: ContentBlock) -> dict[str, Any]:
    """The block as the Messages API takes it: the same JSON it came as (a tool
    result with images: its text, then each image, as the API's content list)."""
    out = b.model_dump(mode="json")
    if isinstance(b, ToolResultBlock):
        images = out.pop("images")
        if images:
            out["content"] = [{"type": "text", "text": b.content}] + [
                {"type": "image", "source": {"type": "base64", **i}} for i in images
            ]
    for key in _OPTIONAL:
        if key in out and out[key] is None and key in type(b).model_fields:
            del out[key]
    return out


class Message(BaseModel):
    """One message of the conversation the model sees."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())
    role: Literal["user", "assistant"]
    content: tuple[ContentBlock, ...]


class Usage(BaseModel):
    """Tokens of one reply (or a sum of replies). `cache_creation_input_tokens` is
    every token written to the cache; `cache_creation_1h_input_tokens` is the part
    of it written for an hour (priced higher), the rest was written for 5 minutes.
    `server_tool_use` counts the provider's server tool requests by kind."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    server_tool_use: dict[str, int] = Field(default_factory=dict)

    @property
    def cache_creation_5m_input_tokens(self) -> int:
        return self.cache_creation_input_tokens - self.cache_creation_1h_input_tokens

    def __add__(self, other: Usage) -> Usage:
        tools = dict(self.server_tool_use)
        for k, n in other.server_tool_use.items():
            tools[k] = tools.get(k, 0) + n
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_creation_1h_input_tokens=self.cache_creation_1h_input_tokens
            + other.cache_creation_1h_input_tokens,
            server_tool_use=tools,
        )
