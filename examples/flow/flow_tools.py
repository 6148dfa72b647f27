"""The flow example's own tools: a deterministic test run that fails when the tests
do (so a flow can route on it), and a merge that records each merge once in the
workspace's `merged.log` (its side effect, which a re-driven flow must not repeat).
The agent stages use the fix_tests example's file tools."""

import json
import subprocess
import sys

from agentledger import Lookup, ToolContext, ToolFailure, WorkspaceFiles, file_resource, tool

TESTS_TIMEOUT_S = 50.0
OUTPUT_TAIL = 1_000


@tool(read_only=True, reads=lambda a, ws: [file_resource(".", ws)], scope="tests:run", timeout_s=60)
def verify_tests(ctx: ToolContext) -> dict:
    """Run `python -m pytest -q` in the workspace: fails when the tests fail."""
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    try:
        done = ctx.run([sys.executable, "-m", "pytest", "-q"], env=env, timeout_s=TESTS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ToolFailure("timeout", f"pytest did not finish in {TESTS_TIMEOUT_S:g}s") from None
    tail = (done.stdout + done.stderr)[-OUTPUT_TAIL:]
    if done.returncode != 0:
        raise ToolFailure("tests_failed", f"pytest exited {done.returncode}: {tail}")
    return {"passed": True, "tail": tail}


def _merged(ctx: ToolContext) -> list[dict]:
    files = WorkspaceFiles.of(ctx)
    try:
        text = files.read_text("merged.log").text
    except ToolFailure:  # not there yet
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def merge_lookup(op_key: str, args: dict, ctx: ToolContext) -> Lookup:
    """Was this merge done? merged.log says: a worker killed mid-merge is not a
    second merge."""
    done = [m for m in _merged(ctx) if m.get("op") == op_key]
    return Lookup(done=True, result={"merged": done[0]["branch"]}) if done else Lookup(done=False)


@tool(
    writes=lambda a, ws: [file_resource("merged.log", ws)],
    scope="repo:merge",
    timeout_s=10,
    lookup=merge_lookup,
)
def merge_branch(branch: str, ctx: ToolContext) -> dict:
    """Merge `branch` (here: a line in the workspace's merged.log, with the operation's key)."""
    merged = _merged(ctx) + [{"branch": branch, "op": ctx.op_key}]
    text = "".join(json.dumps(m) + "\n" for m in merged)
    WorkspaceFiles.of(ctx).write_text("merged.log", text)
    return {"merged": branch}
