"""The CLI's side of `--mcp FILE`: start the servers of the file, check what a
run spec asks of them, and keep the workers' tool set in step with the servers
that are up (a server that goes down takes its tools and its part of the
fingerprint with it until it is back), and answer what the servers ask during
calls (sampling, elicitation: `handlers.tool_requests`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agentledger.events.mcp_policy import unknown_asks
from agentledger.schemas.errors import SpecProblem
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.tools import sandbox_probe
from agentledger.services.adapters.tools.mcp.config import header_values, load_servers_file
from agentledger.services.adapters.tools.mcp.hub import McpHub
from agentledger.services.adapters.tools.sandbox import policy_for
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import Services
from agentledger.services.settings import Settings, read_variables


def start_hub(path: str, settings: Settings) -> McpHub:
    """The file's servers, started; a server that does not start is said on stderr
    (its tools are not offered until it is up)."""
    file = load_servers_file(path, max_timeout_s=settings.max_mcp_timeout_s)
    asked = {v for server in file.servers.values() for v in server.headers.values()}
    headers = header_values(path, file, read_variables(asked))
    network = [name for name, server in file.servers.items() if server.command and server.network]
    sandbox_probe.ready(settings, network_tools=network)  # a broken sandbox refuses here
    scratch = Path(settings.state_dir, "mcp", str(os.getpid()))
    scratch.mkdir(parents=True, exist_ok=True)
    hub = McpHub(file, policy=policy_for(settings), scratch_dir=str(scratch), headers=headers)
    for name, why in hub.start().items():
        print(f"agentledger: MCP server {name!r} is not up: {why}", file=sys.stderr)
    return hub


def ask_problems(spec: RunSpec, hub: McpHub | None) -> list[SpecProblem]:
    """The spec's MCP asks (`mcp:<server>`, `<server>__<tool>`) nothing answers."""
    offered = hub.offered() if hub is not None else {}
    problems: list[SpecProblem] = []
    for index, reason in unknown_asks(spec.tools, offered):
        entry = spec.tools[index]
        server = entry.removeprefix("mcp:").split("__")[0]
        if hub is not None and server in hub.file.servers and server not in offered:
            reason = f"MCP server {server!r} is not up: {hub.why_down(server)}"
        problems.append(SpecProblem(f"tools.{index}", reason))
    return problems


def follow_servers(services: Services, hub: McpHub, base: ToolSet) -> None:
    """Re-serve the task queue under the new fingerprint whenever the servers change;
    answer the servers' sampling and elicitation requests for the runs this process serves."""
    from agentledger.services.handlers.tool_requests import ToolRequests

    hub.answer_with(ToolRequests(lambda: services.app))
    hub.on_change(lambda: services.retool(hub.toolset(base)))
