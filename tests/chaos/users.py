"""Two users' same-named tool modules, served on one Redis and one queue name."""

from __future__ import annotations

import time
from pathlib import Path

from agentledger.schemas.inbox import RunRequested
from agentledger.services.adapters.tools.toolset import fingerprint_of
from tests.chaos.kit import cluster, spec, submit, use, write_tool_module
from tests.chaos.runs import Size, finish
from tests.chaos.tally import Figures

USER_TOOLS = '''"""{owner}'s tools: the same module and tool names as the other user's."""

import os
from pathlib import Path

from agentledger import ToolContext, tool


@tool(writes=lambda a, ws: [f"note:{{ws}}"], timeout_s=10)
def note(text: str, ctx: ToolContext) -> dict:
    """Write a note."""
    with open(Path(ctx.workspace, "truth.log"), "a") as f:
        f.write(f"{{ctx.op_key}} {{ctx.call_id}} {{os.getpid()}} {owner}\\n")
    return {{"by": "{owner}"}}
'''


def two_users(tmp: Path, size: Size) -> Figures:
    """Two users' same-named tool modules served on one Redis and one queue name:
    every call runs the code of the run's own user."""
    per_user = max(4, size.runs // 20)
    f = Figures("two users, same-named tools", runs=2 * per_user)
    with cluster(tmp, "users") as c:
        client = c.client()
        workspaces: dict[str, Path] = {}
        owners: dict[str, str] = {}
        pools = []
        for owner in ("carol", "dave"):
            folder = c.tmp / owner
            write_tool_module(folder, USER_TOOLS.format(owner=owner), name="tools")
            pools.append(c.workers(folder, processes=1, queue="shared", module="tools", wait=False))
            toolset = fingerprint_of(["tools"], [str(folder)])
            for i in range(per_user):
                run_id = f"u-{owner}-{i:02d}"
                ws = c.tmp / "ws" / run_id
                ws.mkdir(parents=True)
                workspaces[run_id], owners[run_id] = c.copy_of(run_id), owner
                turns = [{"tool_use": [use(f"n{j}", "note", text=str(j))]} for j in range(3)] + [
                    {"end_turn": "ok"}
                ]
                request = RunRequested(
                    run_id=run_id, request_id=run_id, spec=spec(turns, folder, tools="tools"),
                    base_dir=str(folder), workspace=str(ws), queue="shared", toolset=toolset,
                )  # fmt: skip
                submit(client, c.keys, request, i)
        client.close()
        for pool in pools:  # both started at once: they boot side by side
            pool.ready(1)
        c.start_intake()
        finish(f, c, workspaces, [], size, time.monotonic())
        calls = cross = 0
        for run_id, ws in workspaces.items():
            truth = ws / "truth.log"
            for line in truth.read_text().splitlines() if truth.exists() else []:
                calls += 1
                cross += line.split()[-1] != owners[run_id]
        f.extra.update(calls=calls, cross_executions=cross)
        f.expect(f"{cross} calls ran the other user's code", cross == 0)
        f.expect(f"{calls} calls ran, expected {3 * f.runs}", calls == 3 * f.runs)
    return f
