"""How a worker reaches one MCP server: a stdio server is started in the sandbox
(the run's workspace bound read-write, the system and the server's own
`read_only_paths` read-only, no network unless the file says `network: true`,
the same limits as command tools, an empty environment plus the server's
`env`); a `url:` server is reached over streamable HTTP, sent the headers the
operator's file names (their values from the worker's variables)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TextIO

from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agentledger.schemas.mcp_servers import McpServer
from agentledger.services.adapters.tools import handover, launch, lifeline, sandbox
from agentledger.services.adapters.tools.sandbox import SandboxPolicy


def stdio_command(config: McpServer, *, workspace: str | None, policy: SandboxPolicy) -> list[str]:
    """The command line that starts the server: `{workspace}` filled in, sandboxed
    unless the operator turned the sandbox off (as every command: never host root,
    the workspace handed over and its special files covered, a network of its own
    with `network: true`; `launch.py` starts it)."""
    assert config.command is not None
    argv = [a.replace("{workspace}", workspace or "/tmp") for a in config.command]
    env = sandbox.environment(policy, config.env)
    clean = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items()))]
    if not policy.enabled:
        return [*clean, *argv]
    bwrap, prlimit = sandbox.tools()
    root = sandbox.as_root()
    masked: tuple[str, ...] = ()
    if workspace is not None:
        owner = (policy.uid, policy.gid) if root else None
        masked = handover.prepare(workspace, owner=owner, limit=policy.scan_max).special
    flags = sandbox.bwrap_flags(
        workspace=workspace,
        cwd=workspace or "/tmp",
        network=config.network,
        limits=policy.limits,
        info_fd="{info}" if config.network else None,
        read_only_paths=config.read_only_paths,
        root=root,
        masked=masked,
        seccomp_fd="{seccomp}",
        block_fd="{block}" if config.network else None,
    )
    boot = launch.boot_line(
        root=root, network=config.network, seccomp_file=sandbox.private_file("seccomp.bpf")
    )
    enter = ["/bin/sh", "-c", lifeline.ENTER, workspace or "/tmp"]
    inner = [*sandbox.drop_to(policy), *enter, *argv] if root else argv
    limits = sandbox.limit_flags(policy.limits, root=root)
    return [*boot, *clean, prlimit, *limits, "--", bwrap, *flags, "--", *inner]


@asynccontextmanager
async def connect(
    config: McpServer,
    *,
    workspace: str | None,
    policy: SandboxPolicy,
    errlog: TextIO | None,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[tuple[object, object]]:
    """The (read, write) streams of a session with the server. A `url:` server
    is sent the operator's `headers` (the SDK follows a redirect only within the
    server's origin, so they never reach another host)."""
    if config.url is not None:
        async with (
            create_mcp_http_client(headers=dict(headers or {})) as client,
            streamable_http_client(config.url, http_client=client) as streams,
        ):
            yield streams[0], streams[1]
        return
    command = stdio_command(config, workspace=workspace, policy=policy)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=workspace or "/tmp")
    async with stdio_client(params, errlog=errlog or sys.stderr) as streams:
        yield streams[0], streams[1]
