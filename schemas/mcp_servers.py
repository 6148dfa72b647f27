"""The operator's MCP servers file (`--mcp FILE`): which Model Context Protocol
servers a worker starts or connects to, and the policy of each of their tools.
Only the operator writes it; a run spec or an inbox message never names a
server's command or address.

A server is `command:` (stdio, run in the sandbox with the run's workspace
bound) or `url:` (streamable HTTP; `headers:` names the worker variables
holding the values of the HTTP headers it is sent, e.g. its `Authorization`). Per tool: `read_only`, the resources it
`reads`/`writes` as templates over its arguments (`file:{path}`; `{workspace}`
is the run's workspace), its `scope`, `approval`, `timeout_s`, `output_cap`,
`key_fields`, and `lookup` (a tool of the same server that says whether a
write with a given operation key happened). A tool the file does not list is
a write that needs approval."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentledger.schemas.limits import MAX_LIMITS, Limit
from agentledger.schemas.model_build import deferred

SERVER_NAME = r"^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$"  # never "__": it joins server and tool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=deferred())


class McpLookup(_Strict):
    """A tool of the same server asked about an unknown write: `args` are
    templates over the write's arguments plus `{op_key}`. Its result (structured
    content, or JSON text) says `{"done": true|false|null, "result": ...}`."""

    tool: str = Field(min_length=1)
    args: dict[str, str] = Field(default_factory=dict)


class McpToolPolicy(_Strict):
    read_only: bool = False
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    scope: str | None = None
    approval: Literal["always", "never"] | None = Field(
        default=None,
        description="unset: never for a listed tool, unless the server calls it destructive",
    )
    timeout_s: float | None = Field(default=None, gt=0)
    output_cap: int | None = Field(default=4000, ge=1)
    key_fields: tuple[str, ...] | None = None
    lookup: McpLookup | None = None
    limits: tuple[Limit, ...] = Field(
        default=(), max_length=MAX_LIMITS, description="concurrency keys shared by every run"
    )

    @model_validator(mode="after")
    def _reads_only_when_read_only(self) -> McpToolPolicy:
        if self.read_only and (self.writes or self.lookup):
            raise ValueError("a read_only tool has no writes and no lookup")
        return self


class McpServer(_Strict):
    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, pattern=r"^https?://")
    env: dict[str, str] = Field(default_factory=dict, description="variables for a stdio server")
    network: bool = Field(default=False, description="a stdio server may reach the network")
    read_only_paths: tuple[str, ...] = Field(
        default=(), description="absolute folders a stdio server sees read-only (its own code)"
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="a `url:` server's HTTP headers: header name -> the worker variable that "
        "holds its value (read from the worker's environment when it connects; never a value)",
    )
    timeout_s: float = Field(
        default=30.0, gt=0, description="a call's timeout unless its tool says"
    )
    start_timeout_s: float = Field(default=60.0, gt=0)
    tools: dict[str, McpToolPolicy] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` (stdio) and `url` (streamable HTTP)")
        for path in self.read_only_paths:
            if not path.startswith("/"):
                raise ValueError(f"read_only_paths: {path!r} is not absolute")
        if self.headers:
            _check_headers(self.url, self.headers)
        return self


HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _check_headers(url: str | None, headers: dict[str, str]) -> None:
    """Headers (the operator's credentials) go only to a `url:` server, over https
    unless the server is on this machine's loopback, and name variables, not values."""
    if url is None:
        raise ValueError("headers: only a `url:` server is sent headers")
    parsed = urlsplit(url)
    if parsed.scheme != "https" and parsed.hostname not in LOOPBACK:
        raise ValueError(f"headers: {url!r} is plain http; headers are sent only over https")
    for name, variable in headers.items():
        if not HEADER_NAME.match(name):
            raise ValueError(f"headers: {name!r} is not a header name")
        if not VARIABLE.match(variable):
            raise ValueError(
                f"headers.{name}: {variable!r} is not a variable name (give the worker "
                "variable that holds the value, never the value)"
            )


class McpServersFile(_Strict):
    servers: dict[str, McpServer] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> McpServersFile:
        for name in self.servers:
            if not re.match(SERVER_NAME, name):
                raise ValueError(f"server name {name!r}: letters, digits, '-' and single '_' only")
        return self
