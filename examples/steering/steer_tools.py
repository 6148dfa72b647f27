"""Tools for the steering examples: a file reader that fails, a cooperative slow
tool, a subprocess that ignores SIGTERM, and a write that needs approval."""

import time

from agentledger import ToolContext, WorkspaceFiles, file_resource, tool


@tool(read_only=True, reads=lambda a, ws: [file_resource(a["path"], ws)])
def read_file(path: str, ctx: ToolContext) -> str:
    """Read a text file in the workspace."""
    return WorkspaceFiles.of(ctx).read_text(path).text  # inside the workspace only


@tool(read_only=True, timeout_s=60)
def slow_count(seconds: float, ctx: ToolContext) -> dict:
    """Counts for `seconds`, checking between steps whether it should stop."""
    steps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.check_cancelled()  # raises ToolCancelled once the run is cancelled
        time.sleep(0.05)
        steps += 1
    return {"steps": steps}


@tool(read_only=True, timeout_s=60)
def stubborn_sleep(seconds: int, ctx: ToolContext) -> dict:
    """Runs a subprocess that ignores SIGTERM."""
    done = ctx.run(["sh", "-c", f"trap '' TERM; sleep {int(seconds)}"])
    return {"exit_code": done.returncode}


@tool(writes=lambda a, ws: [file_resource(a["path"], ws)], approval="always")
def publish_note(path: str, text: str, ctx: ToolContext) -> dict:
    """Write a note into the workspace; a person must approve every call."""
    WorkspaceFiles.of(ctx).write_text(path, text)
    return {"written": path, "bytes": len(text)}
