"""Tools every run has. `read_output` reads further into a tool output the model
was shown only part of (see events/output_cap.py)."""

from __future__ import annotations

import json

from events.output_cap import READ_TOOL, capped
from services.adapters.tools.context import ToolContext, ToolFailure
from services.adapters.tools.registry import tool

PAGE = 4000


@tool(read_only=True, name=READ_TOOL, output_cap=None)
def read_output(ref: str, ctx: ToolContext, offset: int = 0) -> str:
    """Read a tool's full output from the run's log, from `offset` (characters),
    one page at a time: `ref` is the call id shown in the cut marker."""
    if ctx.outputs is None:
        raise ToolFailure("internal", "outputs cannot be read from here")
    if offset < 0:
        raise ToolFailure("invalid_arguments", "offset must be at least 0")
    output = ctx.outputs(ref)
    if output is None:
        raise ToolFailure("not_found", f"no output of call {ref!r} in this run")
    text = output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)
    if offset >= len(text) and text:
        raise ToolFailure("invalid_arguments", f"offset {offset} is past the end ({len(text)})")
    return capped(text, ref=ref, cap=PAGE, offset=offset)
