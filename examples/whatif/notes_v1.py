"""The whatif example's tools, version 1: `stamp` writes and returns "v1"."""

from agentledger import ToolContext, WorkspaceFiles, file_resource, tool


@tool(writes=lambda a, ws: [file_resource(a["path"], ws)], scope="notes:write", timeout_s=10)
def write_note(path: str, text: str, ctx: ToolContext) -> dict:
    """Write a note (a text file of the workspace)."""
    return {"path": WorkspaceFiles.of(ctx).write_text(path, text).path}


@tool(writes=lambda a, ws: [file_resource("stamp.txt", ws)], scope="notes:write", timeout_s=10)
def stamp(ctx: ToolContext) -> str:
    """Stamp the workspace with the tools' version."""
    WorkspaceFiles.of(ctx).write_text("stamp.txt", "v1\n")
    return "v1"
