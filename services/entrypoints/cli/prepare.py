"""A spec file read and checked before any Redis is touched (`Prepared`: `run` and
`submit`; the tool set alone for `replay --rerun`), and the request for a new run
of it (`request_for`), checked against the inbox's size bound."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentledger.events.mcp_policy import is_mcp_ask, modules_of, unknown_asks
from agentledger.schemas.errors import InvalidSpec, SpecProblem
from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.models.preflight import check_provider
from agentledger.services.adapters.tools.toolset import (
    ToolSet,
    ToolSetError,
    fingerprint_of,
    load_toolset,
)
from agentledger.services.bounded_yaml import Limits
from agentledger.services.clock import new_run_id
from agentledger.services.entrypoints.cli.spec_file import (
    SpecLines,
    load_spec_file,
    source_name,
    with_lines,
)
from agentledger.services.errors import ProviderUnready
from agentledger.services.handlers.spec_check import spec_problems, tool_paths
from agentledger.services.loops.inbox_parse import Rejected, check_size
from agentledger.services.settings import Settings


@dataclass(frozen=True)
class Prepared:
    """A spec file read and checked, before any Redis is touched."""

    spec: RunSpec
    base_dir: str
    lines: SpecLines
    source: str
    toolset: ToolSet | None  # `run` loads the spec's tool modules; `submit` does not
    fingerprint: str
    base: ToolSet | None = None  # the modules' tool set, without the MCP servers
    hub: Any = None  # the MCP servers `run` started (an McpHub), or None
    mcp: str | None = None  # the servers file

    def refuse(self, problems: list[SpecProblem]) -> InvalidSpec:
        return InvalidSpec.of(with_lines(problems, self.lines), source=self.source)


def prepare(
    spec_path: str, command: str, *, mcp: str | None = None, settings: Settings | None = None
) -> Prepared:
    """Load and check the spec file: InvalidSpec with every problem, each with its line.
    `run` imports the spec's tool modules (they run here); `submit` only hashes them.
    `run` also checks that its model can be reached from here (ProviderUnready: no
    key, or its API does not take a connection) before anything is recorded.
    With `mcp`, the servers file's servers are started: their tools and versions
    are part of the tool set (`submit` stops them again once it knows the fingerprint)."""
    limits = Limits(max_bytes=(settings or Settings()).inbox_max_bytes)  # a spec goes in a message
    spec, base_dir, lines = load_spec_file(spec_path, limits)
    paths = tool_paths(spec, base_dir)
    modules = modules_of(spec.tools)
    problems: list[SpecProblem] = []
    toolset, fingerprint, base, hub = None, "", None, None
    try:
        if command == "run" or mcp:
            base = toolset = load_toolset(modules, paths)
            fingerprint = toolset.fingerprint
        else:
            fingerprint = fingerprint_of(modules, paths)
    except ToolSetError as exc:
        index = spec.tools.index(exc.module) if exc.module in spec.tools else 0
        problems.append(SpecProblem(f"tools.{index}", exc.reason))
    if mcp and base is not None:
        from agentledger.services.entrypoints.cli.mcp_servers import start_hub

        hub = start_hub(mcp, settings or Settings())
        toolset = hub.toolset(base)
        fingerprint = toolset.fingerprint
    problems += mcp_ask_problems(spec, hub)
    # `run` is the deployment: its maxima are known here (`submit`'s are the intake's to check)
    maxima = (settings or Settings()) if command == "run" else None
    problems += spec_problems(spec, base_dir, toolset=toolset, settings=maxima)
    if command != "run" and hub is not None:
        hub.close()
        hub, toolset = None, None
    prepared = Prepared(
        spec, base_dir, lines, source_name(spec_path), toolset, fingerprint, base, hub, mcp
    )
    try:
        if problems:
            raise prepared.refuse(problems)
        if command == "run":  # its workers are this process's: their model must answer them
            check_provider(spec.model, settings or Settings())
    except (InvalidSpec, ProviderUnready):
        if hub is not None:
            hub.close()
        raise
    return prepared


def mcp_ask_problems(spec: RunSpec, hub: Any) -> list[SpecProblem]:
    if not any(is_mcp_ask(e) for e in spec.tools):
        return []
    if hub is None:  # no servers here: every ask is unanswered (no MCP SDK needed to say so)
        return [SpecProblem(f"tools.{i}", why) for i, why in unknown_asks(spec.tools, {})]
    from agentledger.services.entrypoints.cli.mcp_servers import ask_problems

    return ask_problems(spec, hub)


def toolset_of(spec: RunSpec, base_dir: str | None) -> ToolSet:
    try:
        return load_toolset(modules_of(spec.tools), tool_paths(spec, base_dir))
    except ToolSetError as exc:
        index = spec.tools.index(exc.module) if exc.module in spec.tools else 0
        raise InvalidSpec(f"tools.{index}", exc.reason) from None


def request_for(
    spec: RunSpec, base_dir: str | None, settings: Settings, *, queue: str, toolset: str
) -> RunRequested:
    """A request for a new run of `spec`. Its workspace is the spec's, from
    `base_dir`: the intake decides whether the run may have it, and copies it."""
    run_id = new_run_id(uuid.uuid4().int % settings.shards)
    if spec.workspace and base_dir is None and not Path(spec.workspace).is_absolute():
        raise InvalidSpec(
            "workspace", f"{spec.workspace!r} is relative, and there is no spec folder"
        )
    request = RunRequested(
        run_id=run_id, request_id=run_id, spec=spec, base_dir=base_dir, queue=queue, toolset=toolset,
    )  # fmt: skip
    try:
        check_size(request.model_dump_json().encode(), settings.inbox_max_bytes)
    except Rejected as exc:
        raise InvalidSpec("", f"{exc.reason} (AGENTLEDGER_INBOX_MAX_BYTES)") from None
    return request
