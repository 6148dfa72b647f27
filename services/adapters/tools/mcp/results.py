"""What an MCP tool's answer becomes in our log: its text (or a summary of
other content, never large binary data), and an `isError` result or a
JSON-RPC error as one of our error codes."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from agentledger.events.mcp_policy import code_for_error_text, code_for_protocol_error
from agentledger.events.tool_step import Errored, Outcome, Succeeded
from agentledger.events.types import ToolError


def outcome_of(result: types.CallToolResult) -> Outcome:
    text, others = _content(result)
    if result.is_error:
        message = text or "the MCP tool reported an error and said nothing more"
        return Errored(
            ToolError(code=code_for_error_text(message), message=message, retryable=False)
        )
    if not others:
        if text or result.structured_content is None:
            return Succeeded(text)
        return Succeeded(_json(result.structured_content))
    return Succeeded({"text": text, "content": others})


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
    text, _ = _content(result)
    return json.loads(text)


def _content(result: types.CallToolResult) -> tuple[str, list[dict[str, Any]]]:
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
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
    return "\n".join(texts), others


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
