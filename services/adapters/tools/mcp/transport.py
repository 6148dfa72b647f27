"""How a worker reaches one MCP server: a stdio server is started in the sandbox
(the run's workspace bound read-write, the system and the server's own
`read_only_paths` read-only, no network unless the file says `network: true`,
the same limits as command tools, an empty environment plus the server's
`env`); a `url:` server is reached over streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from schemas.mcp_servers import McpServer
from services.adapters.tools import sandbox
from services.adapters.tools.sandbox import SandboxPolicy


def stdio_command(
    config: McpServer, *, workspace: str | None, policy: SandboxPolicy
) -> list[str]:
    """The command line that starts the server: `{workspace}` filled in, sandboxed
    unless the operator turned the sandbox off."""
    assert config.command is not None
    argv = [a.replace("{workspace}", workspace or "/tmp") for a in config.command]
    env = sandbox.environment(policy, config.env)
    clean = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items()))]
    if not policy.enabled:
        return [*clean, *argv]
    bwrap, prlimit = sandbox.tools()
    flags = sandbox.bwrap_flags(
        workspace=workspace,
        cwd=workspace or "/tmp",
        network=config.network,
        limits=policy.limits,
        info_fd=None,
        read_only_paths=config.read_only_paths,
    )
    return [*clean, prlimit, *sandbox.limit_flags(policy.limits), "--", bwrap, *flags, "--", *argv]


@asynccontextmanager
async def connect(
    config: McpServer, *, workspace: str | None, policy: SandboxPolicy, errlog: TextIO | None
) -> AsyncIterator[tuple[object, object]]:
    """The (read, write) streams of a session with the server."""
    if config.url is not None:
        async with streamable_http_client(config.url) as streams:
            yield streams[0], streams[1]
        return
    command = stdio_command(config, workspace=workspace, policy=policy)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=workspace or "/tmp")
    async with stdio_client(params, errlog=errlog or sys.stderr) as streams:
        yield streams[0], streams[1]
