"""A worker's MCP servers: started (or connected to) from the operator's servers
file, their tools joined to the worker's tool set and its fingerprint — the
servers' names, their own name and version, their tool definitions and the
file's policy for them — and withdrawn while a server is down, so the worker
takes only runs whose tools it can serve.

A stdio server runs once per workspace (the run's workspace bound in its
sandbox, `{workspace}` in its command); the first instance of each, on a
scratch workspace of the worker's, tells the worker what the server offers.
A `url:` server has one session per worker."""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import re
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import mcp_types as types
from jsonschema import SchemaError  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]

from agentledger.events.mcp_policy import (
    Hints,
    Policy,
    builtin_policy,
    decide_policy,
    offered_name,
)
from agentledger.schemas.mcp_servers import McpServer, McpServersFile
from agentledger.schemas.spec import ToolSpec
from agentledger.services.adapters.tools.mcp import builtins
from agentledger.services.adapters.tools.mcp.client_side import Answerer
from agentledger.services.adapters.tools.mcp.loop import AsyncLoop
from agentledger.services.adapters.tools.mcp.supervisor import Catalog, ServerDown, Supervisor
from agentledger.services.adapters.tools.mcp.tool import McpTool, make_tool
from agentledger.services.adapters.tools.sandbox import SandboxPolicy
from agentledger.services.adapters.tools.toolset import BUILTIN, FINGERPRINT_CHARS, ToolSet

log = logging.getLogger(__name__)
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class McpHub:
    def __init__(
        self,
        file: McpServersFile,
        *,
        policy: SandboxPolicy,
        scratch_dir: str | None = None,
        ping_s: float = 1.0,
        ping_timeout_s: float = 5.0,
        headers: Mapping[str, Mapping[str, str]] | None = None,
    ):
        self.file = file
        self._headers = headers or {}  # server -> its HTTP headers' values (the operator's secrets)
        self._answerer: Answerer | None = None
        self._policy = policy
        self._scratch = Path(scratch_dir or tempfile.mkdtemp(prefix="agentledger-mcp-"))
        self._scratch.mkdir(parents=True, exist_ok=True)
        self._ping = (ping_s, ping_timeout_s)
        self._loop = AsyncLoop()
        self._lock = threading.Lock()
        self._catalog: dict[str, Supervisor] = {}
        self._instances: dict[tuple[str, str | None], Supervisor] = {}
        self._listeners: list[Callable[[], None]] = []
        self._changes: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._errlog: TextIO = open(self._scratch / "servers.log", "a")  # noqa: SIM115 -- held while the hub lives
        self._last_seen = ""
        threading.Thread(target=self._tell, daemon=True, name="agentledger-mcp-retool").start()

    def start(self, timeout_s: float | None = None) -> dict[str, str]:
        """Start every server and wait for each (its own `start_timeout_s`); the
        servers that are not up, with why."""
        for name, config in self.file.servers.items():
            workspace = self._scratch_workspace(name) if config.command else None
            self._catalog[name] = self._supervise(name, config, workspace)
        for sup in self._catalog.values():
            sup.wait_first(timeout_s or sup.config.start_timeout_s)
        self._last_seen = self._seen()
        return {n: s.last_error or s.state for n, s in self._catalog.items() if s.state != "up"}

    def on_change(self, listener: Callable[[], None]) -> None:
        """Called (in a thread of its own) when a server goes down or comes back, or
        says its tools changed (`notifications/tools/list_changed`)."""
        self._listeners.append(listener)

    def answer_with(self, answerer: Answerer | None) -> None:
        """Who answers the servers' sampling and elicitation requests (until then: refused)."""
        self._answerer = answerer

    def up(self) -> frozenset[str]:
        """The servers whose tools are offered: started, and no instance of them down."""
        with self._lock:
            down = {name for (name, _), sup in self._instances.items() if sup.state == "down"}
            return frozenset(
                n
                for n, s in self._catalog.items()
                if s.state == "up" and s.catalog and n not in down
            )

    def why_down(self, name: str) -> str:
        sup = self._catalog.get(name)
        return (sup.last_error or sup.state) if sup else "not in the servers file"

    def instance(self, server: str, workspace: str | None) -> Supervisor:
        """The server's instance for this workspace, started on first need."""
        config = self.file.servers[server]
        key = (server, workspace if config.command else None)
        with self._lock:
            sup = self._instances.get(key) or (self._catalog[server] if key[1] is None else None)
            if sup is None:
                sup = self._instances[key] = self._supervise(server, config, workspace)
        if not sup.wait_up(config.start_timeout_s):
            raise ServerDown(f"MCP server {server!r} is not up: {sup.last_error or sup.state}")
        return sup

    def toolset(self, base: ToolSet) -> ToolSet:
        """`base` with the tools of the servers that are up, and its fingerprint."""
        up = sorted(self.up())
        if not up:
            return base
        tools = {n: t for n, t in base.tools.items() if t.module != BUILTIN}
        builtin = {n: t for n, t in base.tools.items() if t.module == BUILTIN}
        described: list[Any] = [base.fingerprint]
        for name in up:
            sup = self._catalog[name]
            assert sup.catalog is not None
            for tool in self._tools_of(name, sup.config, sup.catalog):
                if tool.spec.name in tools or tool.spec.name in builtin:
                    log.warning(
                        "MCP tool %r is left out: a tool of that name exists", tool.spec.name
                    )
                    continue
                tools[tool.spec.name] = tool
            described.append(_descriptor(name, sup))
        digest = hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode())
        tools.update(builtin)  # offered last, as in every tool set
        return ToolSet(base.modules, digest.hexdigest()[:FINGERPRINT_CHARS], tools)

    def offered(self) -> dict[str, list[str]]:
        """Server -> the names its tools are offered under (servers that are up)."""
        found: dict[str, list[str]] = {}
        for name in self.up():
            catalog = self._catalog[name].catalog
            assert catalog is not None
            found[name] = [offered_name(name, t.name) for t in catalog.tools]
        return found

    def close(self) -> None:
        for sup in [*self._catalog.values(), *self._instances.values()]:
            sup.close()
        self._loop.stop()
        self._errlog.close()

    def _supervise(self, name: str, config: McpServer, workspace: str | None) -> Supervisor:
        ping_s, ping_timeout_s = self._ping
        return Supervisor(
            name, config, workspace=workspace, policy=self._policy, loop=self._loop,
            on_state=lambda _: self._changes.put(True), errlog=self._errlog,
            ping_s=ping_s, ping_timeout_s=ping_timeout_s, headers=self._headers.get(name, {}),
            answerer=lambda: self._answerer,
        ).start()  # fmt: skip

    def _scratch_workspace(self, name: str) -> str:
        folder = self._scratch / "workspaces" / name
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder)

    def _tell(self) -> None:
        while True:
            self._changes.get()
            now = self._seen()
            if now == self._last_seen:
                continue
            self._last_seen = now
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:  # a listener's failure must not stop the others being told
                    log.exception("an MCP tool set listener failed")

    def _seen(self) -> str:
        """What the tool set is made of: the servers up and what each offers."""
        up = sorted(self.up())
        described = [_descriptor(name, self._catalog[name]) for name in up]
        return hashlib.sha256(
            json.dumps(described, sort_keys=True, default=str).encode()
        ).hexdigest()

    def _tools_of(self, server: str, config: McpServer, catalog: Catalog) -> list[McpTool]:
        made: list[McpTool] = []
        names = {t.name for t in catalog.tools}
        extra = builtins.offered(catalog.resources, catalog.prompts, names)
        for listed in config.tools:
            if listed not in names and listed not in {t.name for t in extra}:
                log.warning(
                    "MCP server %r has no tool %r (the servers file lists it)", server, listed
                )
        for t in catalog.tools:
            tool = self._tool(server, config, t, names)
            if tool is not None:
                made.append(tool)
        for t in extra:
            tool = self._tool(server, config, t, names, kind=t.name)
            if tool is not None:
                made.append(tool)
        return made

    def _tool(
        self, server: str, config: McpServer, t: types.Tool, names: set[str], kind: str = "tool"
    ) -> McpTool | None:
        name = offered_name(server, t.name)
        if not TOOL_NAME.match(name):
            log.warning("MCP tool %r is left out: its name cannot be offered to a model", name)
            return None
        schema = dict(t.input_schema)
        try:
            validator = validator_for(schema)(schema)
            validator.check_schema(schema)
        except SchemaError as exc:
            log.warning(
                "MCP tool %r is left out: its inputSchema is invalid: %s", name, exc.message
            )
            return None
        listed = config.tools.get(t.name)
        policy = self._policy_of(server, config, t, kind)
        lookup = listed.lookup if listed else None
        if lookup is not None and lookup.tool not in names:
            log.warning("MCP tool %r: its lookup %r is not a tool of the server", name, lookup.tool)
            lookup = None
        spec = ToolSpec(
            name=name, description=t.description or t.title or "", input_schema=schema,
            read_only=policy.read_only, scope=policy.scope, timeout_s=policy.timeout_s,
            limits=policy.limits,
        )  # fmt: skip
        return make_tool(
            spec=spec, reads=lambda a: (), writes=lambda a: (), module=f"mcp:{server}",
            key_fields=policy.key_fields, output_cap=policy.output_cap, server=server,
            remote=t.name, policy=policy, validator=validator, lookup_spec=lookup, hub=self,
            kind=kind,
        )  # fmt: skip

    @staticmethod
    def _policy_of(server: str, config: McpServer, t: types.Tool, kind: str) -> Policy:
        listed = config.tools.get(t.name)
        if kind != "tool" and listed is None:
            return builtin_policy(server, config.timeout_s)
        ann = t.annotations
        hints = Hints(ann.read_only_hint, ann.destructive_hint) if ann else Hints()
        return decide_policy(server, t.name, listed, hints, timeout_s=config.timeout_s)


def _descriptor(name: str, sup: Supervisor) -> dict[str, Any]:
    assert sup.catalog is not None
    config = sup.config.model_dump(mode="json")
    config["env"] = sorted(config["env"])  # the names only: values may be secrets
    return {
        "server": name,
        "implementation": sup.catalog.server,
        "version": sup.catalog.version,
        "serves": {"resources": sup.catalog.resources, "prompts": sup.catalog.prompts},
        "config": config,
        "tools": sorted(
            (t.model_dump(mode="json", exclude_none=True) for t in sup.catalog.tools),
            key=lambda d: str(d.get("name")),
        ),
    }
