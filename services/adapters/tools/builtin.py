"""Tools every run has. `read_output` reads further into a tool output the model
was shown only part of (see events/output_cap.py); `delegate` starts a child run
(offered only to a run whose spec sets `delegate:`, see events/delegate.py)."""

from __future__ import annotations

from agentledger.events.delegate import DELEGATE
from agentledger.events.output_cap import READ_TOOL, window
from agentledger.services.adapters.tools.context import ToolContext, ToolFailure
from agentledger.services.adapters.tools.registry import tool

PAGE = 4000
MARKER_ROOM = 500  # its own page's marker: the model is shown the page and the marker whole


@tool(read_only=True, name=READ_TOOL, output_cap=PAGE + MARKER_ROOM)
def read_output(ref: str, ctx: ToolContext, offset: int = 0) -> str:
    """Read a tool's full output from the run's log, from `offset` (characters),
    one page at a time: `ref` is the call id shown in the cut marker."""
    if ctx.output_window is None:
        raise ToolFailure("internal", "outputs cannot be read from here")
    if offset < 0:
        raise ToolFailure("invalid_arguments", "offset must be at least 0")
    found = ctx.output_window(ref, offset, offset + PAGE)
    if found is None:
        raise ToolFailure("not_found", f"no output of call {ref!r} in this run")
    shown, total = found
    if offset >= total and total:
        raise ToolFailure("invalid_arguments", f"offset {offset} is past the end ({total})")
    if offset == 0 and total <= PAGE:
        return shown  # the whole output
    return window(shown, ref=ref, offset=offset, total=total)


@tool(read_only=True, name=DELEGATE, timeout_s=600.0, output_cap=PAGE)
def delegate(
    task: str, tools: list[str] | None = None, budgets: dict[str, float] | None = None
) -> str:
    """Start a child run on `task` (its own model loop, this run's principal), with some
    of this run's tool modules (`tools`) and budgets (`budgets`: max_turns, max_cost_usd,
    max_input_tokens, max_output_tokens, max_wall_clock_s; never more than this run has
    left); returns the child's status, final text and spend when it ends. Two calls in
    one turn run two children at once."""
    raise ToolFailure("internal", "delegate is run by its run's worker, never as a function")
