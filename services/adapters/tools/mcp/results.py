"""What an MCP tool's answer becomes in our log: its text (or a summary of
other content, never large binary data), its images (PNG, JPEG, GIF, WebP up
to IMAGE_MAX_CHARS of base64 in all, kept so the model is shown them; larger
ones summarised), and an `isError` result or a JSON-RPC error as one of our
error codes."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from agentledger.events.mcp_policy import code_for_error_text, code_for_protocol_error
from agentledger.events.tool_step import Errored, Outcome, Succeeded
from agentledger.events.types import ToolError

IMAGE_MAX_CHARS = 48_000  # base64 characters of a result's images kept: an event stays whole
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def outcome_of(result: types.CallToolResult) -> Outcome:
    text, others, images = _content(result)
    if result.is_error:
        message = text or "the MCP tool reported an error and said nothing more"
        return Errored(
            ToolError(code=code_for_error_text(message), message=message, retryable=False)
        )
    if not others and not images:
        if text or result.structured_content is None:
            return Succeeded(text)
        return Succeeded(_json(result.structured_content))
    output: dict[str, Any] = {"text": text, "content": others}
    return Succeeded({**output, "images": images} if images else output)


def protocol_error(code: int, message: str) -> Errored:
    return Errored(
        ToolError(
            code=code_for_protocol_error(code),
            message=f"MCP error {code}: {message}",
            retryable=False,
        )
    )


def parsed(result: types.CallToolResult) -> Any:
    """A lookup's answer: its structured content when it says `done`, else its text as JSON."""
    sc = result.structured_content
    if isinstance(sc, dict) and "done" in sc:
        return sc
    text, _, _ = _content(result)
    return json.loads(text)


def _content(
    result: types.CallToolResult,
) -> tuple[str, list[dict[str, Any]], list[dict[str, str]]]:
    """Its text, a summary of its other blocks, and the images kept for the model."""
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    images: list[dict[str, str]] = []
    left = IMAGE_MAX_CHARS
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent) and _keeps(block, left):
            images.append({"media_type": block.mime_type, "data": block.data})
            left -= len(block.data)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            others.append(
                {"type": block.type, "mime_type": block.mime_type, "base64_chars": len(block.data)}
            )
        else:
            dumped = block.model_dump(mode="json", exclude_none=True)
            resource = dumped.get("resource")
            if isinstance(resource, dict) and "blob" in resource:
                resource["blob"] = f"({len(resource['blob'])} base64 characters)"
            others.append(dumped)
    return "\n".join(texts), others, images


def _keeps(block: types.ImageContent, left: int) -> bool:
    return block.mime_type in IMAGE_TYPES and len(block.data) <= left


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
