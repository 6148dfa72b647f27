"""A server's resources and prompts, offered as tools of the server
(`<server>__mcp_list_resources`, `__mcp_read_resource`, `__mcp_list_prompts`,
`__mcp_get_prompt`) when it declares them, so reading them goes through the
same validation, locks, ledger and approvals as any call. Each is a read:
unless the operator's file lists it (then its policy is the file's), it reads
`mcp:<server>` (it waits for the server's unlisted writes) and needs no approval.
A `file:` resource URI must name a path inside the run's workspace (a run with
none may read no `file:` resource). Each answer becomes a tool result: text as
text, images as images, other binary data as its size."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import mcp_types as types
from mcp.client.session import ClientSession
from mcp_types import PaginatedRequestParams

from agentledger.events.mcp_policy import TemplateError, file_resource

LIST_RESOURCES, READ_RESOURCE = "mcp_list_resources", "mcp_read_resource"
LIST_PROMPTS, GET_PROMPT = "mcp_list_prompts", "mcp_get_prompt"
_CURSOR = {"cursor": {"type": "string", "description": "the next_cursor of a previous page"}}
_NO_MORE = {"type": "object", "properties": _CURSOR, "additionalProperties": False}

DEFINITIONS: dict[str, tuple[str, dict[str, Any]]] = {
    LIST_RESOURCES: ("The server's resources and resource templates (uri, name, type).", _NO_MORE),
    READ_RESOURCE: (
        "Read one of the server's resources by its URI.",
        {
            "type": "object",
            "properties": {"uri": {"type": "string", "minLength": 1}},
            "required": ["uri"],
            "additionalProperties": False,
        },
    ),
    LIST_PROMPTS: ("The server's prompts and their arguments.", _NO_MORE),
    GET_PROMPT: (
        "Get one of the server's prompts, filled with its arguments.",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
}


def offered(resources: bool, prompts: bool, taken: set[str]) -> list[types.Tool]:
    """The built-in tools of a server that declares resources and/or prompts; a name
    one of its own tools already has is left to that tool."""
    names = ([LIST_RESOURCES, READ_RESOURCE] if resources else []) + (
        [LIST_PROMPTS, GET_PROMPT] if prompts else []
    )
    return [
        types.Tool(name=n, description=DEFINITIONS[n][0], input_schema=DEFINITIONS[n][1])
        for n in names
        if n not in taken
    ]


def uri_reads(uri: str, workspace: str | None) -> list[str]:
    """The resources a read of `uri` locks: a `file:` URI its path (inside the
    workspace, or refused), any other nothing beyond the server."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return []
    if parts.netloc not in ("", "localhost"):
        raise TemplateError("uri", f"{uri!r} names another host")
    if workspace is None:
        raise TemplateError("uri", f"{uri!r} is a file and this run has no workspace")
    return [file_resource(unquote(parts.path), workspace)]


Send = Callable[[ClientSession], Awaitable[types.CallToolResult]]


def request(kind: str, args: dict[str, Any]) -> Send:
    """The request a built-in sends, its answer as a tool result."""
    cursor = args.get("cursor")
    page = PaginatedRequestParams(cursor=cursor) if cursor else None

    async def list_resources(session: ClientSession) -> types.CallToolResult:
        found = await session.list_resources(params=page)
        templates = await session.list_resource_templates(params=None if cursor else page)
        return _json(
            {
                "resources": [_brief(r) for r in found.resources],
                "templates": [_brief(t) for t in templates.resource_templates]
                if not cursor
                else [],
                "next_cursor": found.next_cursor,
            }
        )

    async def read_resource(session: ClientSession) -> types.CallToolResult:
        read = await session.read_resource(args["uri"])
        return types.CallToolResult(content=[_block(c) for c in read.contents])

    async def list_prompts(session: ClientSession) -> types.CallToolResult:
        found = await session.list_prompts(params=page)
        prompts = [p.model_dump(mode="json", exclude_none=True) for p in found.prompts]
        return _json({"prompts": prompts, "next_cursor": found.next_cursor})

    async def get_prompt(session: ClientSession) -> types.CallToolResult:
        got = await session.get_prompt(args["name"], args.get("arguments"))
        content: list[types.ContentBlock] = []
        for message in got.messages:
            block = message.content
            if isinstance(block, types.TextContent):
                block = types.TextContent(type="text", text=f"[{message.role}] {block.text}")
            content.append(block)
        return types.CallToolResult(content=content)

    chosen = {
        LIST_RESOURCES: list_resources,
        READ_RESOURCE: read_resource,
        LIST_PROMPTS: list_prompts,
        GET_PROMPT: get_prompt,
    }
    return chosen[kind]


def _brief(item: types.Resource | types.ResourceTemplate) -> dict[str, Any]:
    keep = ("uri", "uri_template", "name", "title", "description", "mime_type")
    dumped = item.model_dump(mode="json", exclude_none=True)
    return {k: v for k, v in dumped.items() if k in keep}


def _block(c: types.TextResourceContents | types.BlobResourceContents) -> types.ContentBlock:
    if isinstance(c, types.TextResourceContents):
        return types.TextContent(type="text", text=c.text)
    if (c.mime_type or "").startswith("image/"):
        return types.ImageContent(type="image", data=c.blob, mime_type=c.mime_type or "")
    return types.EmbeddedResource(type="resource", resource=c)


def _json(value: Any) -> types.CallToolResult:
    text = json.dumps(value, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
