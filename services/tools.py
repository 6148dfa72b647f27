"""Deprecated: the old import path of the tool API, kept for one release. Import from
`agentledger` instead (the same names, the very same objects: one `@tool` registry):

    from agentledger import ToolContext, ToolFailure, WorkspaceFiles, check, tool

Importing this module warns (DeprecationWarning, pointing at the importing line) and hands
on `agentledger`'s names. It is the only module of ours under the bare name `services`. In
a checkout the `services/` folder is on the path as itself, so this file answers
`services.tools`; the wheel ships it as a top-level `services/tools.py` with no
`services/__init__.py` (a namespace package portion, from `.pkg/services/`), so a user's
own `services` package, wherever it is on the path, wins over it and is never shadowed."""

import warnings

from agentledger import (
    Lookup,
    ToolCancelled,
    ToolContext,
    ToolFailure,
    WorkspaceFiles,
    check,
    file_resource,
    tool,
)

__all__ = [
    "Lookup", "ToolCancelled", "ToolContext", "ToolFailure", "WorkspaceFiles", "check",
    "file_resource", "tool",
]  # fmt: skip


warnings.warn(
    "services.tools is deprecated and goes in the next release: import from agentledger "  # rename: keep
    "(from agentledger import tool, ToolContext, ToolFailure, WorkspaceFiles)",
    DeprecationWarning,
    stacklevel=2,  # the importing line (the import machinery's frames are skipped)
)
