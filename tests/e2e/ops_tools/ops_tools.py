"""Tools of the operations tests: a slow read and a write of the same key (the
write waits for the read's lock), and the write logs a line with a secret in
it, from the worker thread that runs it."""

import logging
import os
import time

from agentledger import ToolContext, tool

log = logging.getLogger("ops_tools")


@tool(read_only=True, reads=lambda a: [f"kv:{a['key']}"])
def ops_slow_read(key: str, delay_s: float, ctx: ToolContext) -> dict:
    """Read a key slowly."""
    time.sleep(delay_s)
    return {"key": key}


@tool(writes=lambda a: [f"kv:{a['key']}"])
def ops_logged_write(key: str, ctx: ToolContext) -> dict:
    """Write a key, and log that it did (with the run's secret, which must not show)."""
    log.warning(
        "wrote %s with token %s and key sk-ant-api03-abcdefghijklmnop",
        key,
        os.environ["OPS_SECRET"],
    )
    return {"key": key, "written": True}
