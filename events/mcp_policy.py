"""The policy of an MCP server's tools, decided from the operator's servers file
and never loosened by the server: a tool the file does not list is a write that
needs approval and locks the whole server (`mcp:<server>`); `read_only` holds
only where the operator says so; `destructiveHint` can only make a policy
stricter (a destructive "read" is a write, and a write the server calls
destructive needs approval unless the operator decided otherwise for it).

Also pure: the names tools are offered under (`<server>__<tool>`), which of them
a run spec asks for (`fs__write_file` or `mcp:fs`), the resource templates
(`file:{path}` over the call's arguments, `{workspace}`), and how an `isError`
result or a JSON-RPC error maps to our error codes."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentledger.events.types import ErrorCode
from agentledger.schemas.limits import Limit
from agentledger.schemas.mcp_servers import McpToolPolicy

SEP = "__"
ASK_PREFIX = "mcp:"
UNLISTED_REASON = "is not listed in the operator's MCP servers file: a write that needs approval"
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def offered_name(server: str, tool: str) -> str:
    return f"{server}{SEP}{tool}"


def is_mcp_ask(entry: str) -> bool:
    """A run spec's `tools:` entry that names MCP tools, not a tool module."""
    return entry.startswith(ASK_PREFIX) or SEP in entry


def modules_of(entries: Sequence[str]) -> tuple[str, ...]:
    return tuple(e for e in entries if not is_mcp_ask(e))


def asks_for(entries: Sequence[str], server: str, offered: str) -> bool:
    """Does a run spec's `tools:` ask for this MCP tool (by its name or its server)?"""
    return offered in entries or f"{ASK_PREFIX}{server}" in entries


def unknown_asks(
    entries: Sequence[str], offered: Mapping[str, Sequence[str]]
) -> list[tuple[int, str]]:
    """(index, reason) of each MCP ask no server of the file can answer;
    `offered` is server -> its offered tool names."""
    problems: list[tuple[int, str]] = []
    every = {name for names in offered.values() for name in names}
    for i, entry in enumerate(entries):
        if entry.startswith(ASK_PREFIX):
            server = entry[len(ASK_PREFIX) :]
            if server not in offered:
                known = ", ".join(sorted(offered)) or "none (no --mcp file)"
                problems.append((i, f"no MCP server {server!r}; servers: {known}"))
        elif SEP in entry and entry not in every:
            known = ", ".join(sorted(every)) or "none (no --mcp file)"
            problems.append((i, f"no MCP tool {entry!r}; tools: {known}"))
    return problems


@dataclass(frozen=True, slots=True)
class Hints:
    """What the server says of a tool (`annotations`): untrusted."""

    read_only: bool | None = None
    destructive: bool | None = None


@dataclass(frozen=True, slots=True)
class Policy:
    read_only: bool
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    scope: str | None
    approval: Literal["always", "never"]
    approval_reason: str | None  # why approval is always needed, for the approval request
    timeout_s: float
    output_cap: int | None
    key_fields: tuple[str, ...] | None
    limits: tuple[Limit, ...] = ()  # concurrency keys (the servers file's; none when unlisted)


def decide_policy(
    server: str, tool: str, listed: McpToolPolicy | None, hints: Hints, *, timeout_s: float
) -> Policy:
    """The policy a tool runs under. The hints never loosen what the file says."""
    name = offered_name(server, tool)
    whole_server = (f"mcp:{server}",)
    if listed is None:
        return Policy(
            read_only=False, reads=(), writes=whole_server, scope=None, approval="always",
            approval_reason=f"{name} {UNLISTED_REASON}", timeout_s=timeout_s,
            output_cap=4000, key_fields=None,
        )  # fmt: skip
    read_only, writes = listed.read_only, listed.writes
    approval, reason = listed.approval or "never", None
    if hints.destructive and read_only:
        read_only, writes = False, listed.reads or whole_server
        approval = "always"
        reason = f"{name} is read_only in the servers file, but the server calls it destructive"
    elif hints.destructive and listed.approval is None:
        approval = "always"
        reason = f"the server calls {name} destructive (set `approval: never` for it to decide otherwise)"
    if not read_only and not writes:
        writes = whole_server  # a write touches something: at least the server itself
    if approval == "always" and reason is None:
        reason = f"{name} always needs approval (the servers file)"
    return Policy(
        read_only=read_only, reads=listed.reads, writes=writes, scope=listed.scope,
        approval=approval, approval_reason=reason,
        timeout_s=listed.timeout_s or timeout_s, output_cap=listed.output_cap,
        key_fields=listed.key_fields, limits=listed.limits,
    )  # fmt: skip


def builtin_policy(server: str, timeout_s: float) -> Policy:
    """A server's resources and prompts tools unless the file lists them: reads
    that wait for the server's unlisted writes (`mcp:<server>`), no approval."""
    return Policy(
        read_only=True, reads=(f"mcp:{server}",), writes=(), scope=None, approval="never",
        approval_reason=None, timeout_s=timeout_s, output_cap=4000, key_fields=None,
    )  # fmt: skip


class TemplateError(ValueError):
    """A resource template that cannot be filled from the call's arguments."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


def expand(templates: Sequence[str], args: Mapping[str, Any], workspace: str | None) -> list[str]:
    """The resources the templates name for these arguments, sorted, each once.
    An argument that is a list gives one resource per element. A `file:` resource
    is a normalised absolute path; relative ones are inside the workspace, and one
    outside the workspace is refused (TemplateError)."""
    found: set[str] = set()
    for template in templates:
        for value in _fill(template, args, workspace):
            found.add(_file(value, workspace) if value.startswith("file:") else value)
    return sorted(found)


def _fill(template: str, args: Mapping[str, Any], workspace: str | None) -> list[str]:
    names = _FIELD.findall(template)
    values: list[str] = [template]
    for name in dict.fromkeys(names):
        if name == "workspace":
            if workspace is None:
                raise TemplateError(
                    "(input)", f"{template!r} needs the run's workspace; this run has none"
                )
            choices: list[str] = [workspace]
        elif name not in args or args[name] is None:
            raise TemplateError(name, f"is needed to know what the call touches ({template!r})")
        else:
            raw = args[name]
            items = raw if isinstance(raw, list) else [raw]
            if not items:
                raise TemplateError(name, f"is empty; {template!r} needs at least one")
            choices = [v if isinstance(v, str) else str(v) for v in items]
        values = [v.replace("{" + name + "}", c) for v in values for c in choices]
    return values


def _file(resource: str, workspace: str | None) -> str:
    return file_resource(resource[len("file:") :], workspace)


def file_resource(path: str, workspace: str | None) -> str:
    """`file:<path>`, normalised; a relative path is inside the workspace, and one
    outside the workspace is refused (TemplateError)."""
    if workspace is None:
        if not path.startswith("/"):
            raise TemplateError("(input)", f"{path!r} is relative and this run has no workspace")
        return "file:" + posixpath.normpath(path)
    root = posixpath.normpath(workspace)
    full = posixpath.normpath(posixpath.join(root, path))
    if full != root and not full.startswith(root.rstrip("/") + "/"):
        raise TemplateError("(input)", f"path {path!r} is outside the workspace {root!r}")
    return "file:" + full


def code_for_error_text(text: str) -> ErrorCode:
    """The code of a tool's own error (`isError`), from what it says."""
    low = text.lower()
    if any(w in low for w in ("denied", "not allowed", "outside allowed", "permission")):
        return "permission_denied"
    if any(w in low for w in ("enoent", "not found", "no such file", "does not exist")):
        return "not_found"
    if any(w in low for w in ("invalid", "validation", "required")):
        return "invalid_arguments"
    if "rate limit" in low or "too many requests" in low:
        return "rate_limited"
    if "timed out" in low or "timeout" in low:
        return "timeout"
    return "internal"


JSONRPC_CODES: Mapping[int, ErrorCode] = {
    -32602: "invalid_arguments",  # invalid params
    -32601: "unknown_tool",  # method not found
    -32001: "timeout",  # the SDK's request timeout
    -32002: "not_found",  # resource not found
}


def code_for_protocol_error(code: int) -> ErrorCode:
    return JSONRPC_CODES.get(code, "internal")
