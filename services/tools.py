"""The tool API for tool authors: `@tool` on a plain function registers it;
`@check` declares one an acceptance check (`python: module:function`).

    from services.tools import ToolContext, ToolFailure, WorkspaceFiles, check, tool

`ctx.run([...])` runs a command in the sandbox; `WorkspaceFiles` reads and writes
files strictly inside the run's workspace. This module only re-exports; the
registry lives in `services.adapters.tools`."""

from services.adapters.tools.context import Lookup, ToolCancelled, ToolContext, ToolFailure
from services.adapters.tools.registry import check, tool
from services.adapters.tools.workspace_files import WorkspaceFiles, file_resource

__all__ = [
    "Lookup", "ToolCancelled", "ToolContext", "ToolFailure", "WorkspaceFiles", "check",
    "file_resource", "tool",
]
