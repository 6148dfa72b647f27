"""Tools for the parallel-calls example. Each records its own start and end
times (wall clock) in the workspace's timings.jsonl, so a test can see from
the tools' side which calls overlapped and in which order they ran."""

import json
import os
import time

from agentledger import ToolContext, ToolFailure, WorkspaceFiles, file_resource, tool


def _file(args: dict, workspace: str | None) -> list[str]:
    """The file a call touches, named the same on every host: the workspace's
    folder and the path inside it."""
    return [file_resource(args["path"], workspace)]


def _record(ctx: ToolContext, tool: str, path: str, start: float) -> None:
    line = {"run": ctx.run_id, "call": ctx.call_id, "tool": tool, "path": path}
    line |= {"start": start, "end": time.time(), "pid": os.getpid()}
    # one short append: whole lines even from calls at the same time
    WorkspaceFiles.of(ctx).append_text("timings.jsonl", json.dumps(line) + "\n")


@tool(read_only=True, reads=_file, timeout_s=10)
def par_read(path: str, ctx: ToolContext, hold_s: float = 0.5) -> dict:
    """Read a file of the workspace; takes `hold_s` seconds (a slow service)."""
    start = time.time()
    text = WorkspaceFiles.of(ctx).read_text(path).text
    time.sleep(hold_s)
    _record(ctx, "par_read", path, start)
    return {"path": path, "text": text}


@tool(writes=_file, timeout_s=10)
def par_append(path: str, line: str, ctx: ToolContext, hold_s: float = 0.3) -> dict:
    """Append a line to a file of the workspace, slowly: read, wait, write back."""
    start = time.time()
    files = WorkspaceFiles.of(ctx)
    try:
        before = files.read_text(path).text
    except ToolFailure as exc:
        if exc.code != "not_found":
            raise
        before = ""
    time.sleep(hold_s)  # a lost update if two of these ever overlapped
    files.write_text(path, before + line + "\n")
    _record(ctx, "par_append", path, start)
    return {"path": path, "lines": len((before + line).splitlines())}
