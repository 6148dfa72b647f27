"""agentledger: tool-using AI agents, every step recorded in an event log on Redis streams.

The tool author's whole API is imported from here:

    from agentledger import ToolContext, ToolFailure, WorkspaceFiles, check, tool

`@tool` on a plain function registers it; `@check` declares one an acceptance check
(`python: module:function`); `ctx.run([...])` runs a command in the sandbox; `WorkspaceFiles`
reads and writes files strictly inside the run's workspace.

The code is in three subpackages, the repository's top-level folders: `agentledger.events`
(the pure core), `agentledger.schemas` (the data contracts) and `agentledger.services` (the
shell). In a checkout this folder (`.pkg/agentledger/`) holds a symlink to each; the wheel
holds them as folders. The names below are looked up on first use, so `import agentledger`
(the CLI's first import) loads nothing else."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentledger.services.adapters.tools.context import (
        Lookup,
        ToolCancelled,
        ToolContext,
        ToolFailure,
    )
    from agentledger.services.adapters.tools.registry import check, tool
    from agentledger.services.adapters.tools.workspace_files import WorkspaceFiles, file_resource

_TOOLS = "agentledger.services.adapters.tools"
_HOMES = {
    "Lookup": f"{_TOOLS}.context",
    "ToolCancelled": f"{_TOOLS}.context",
    "ToolContext": f"{_TOOLS}.context",
    "ToolFailure": f"{_TOOLS}.context",
    "WorkspaceFiles": f"{_TOOLS}.workspace_files",
    "check": f"{_TOOLS}.registry",
    "file_resource": f"{_TOOLS}.workspace_files",
    "tool": f"{_TOOLS}.registry",
}

__all__ = [
    "Lookup", "ToolCancelled", "ToolContext", "ToolFailure", "WorkspaceFiles", "check",
    "file_resource", "tool",
]  # fmt: skip

if not TYPE_CHECKING:  # mypy reads the imports above; at run time a name is imported when used

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'agentledger' has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
