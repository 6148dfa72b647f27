"""What a call waiting for a concurrency key waits for, as an operator sees it: a
run's two parallel calls to a tool with `max: 1` whose first answer is "rate
limited, retry after 6 s" — while the second waits, `agentledger status RUN` names
the key, its holders' count (when it asked) and the back-off's end, and the workers' metrics show
the key's holders, waiters and closure; then the run completes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from e2ekit import AGENTLEDGER, Cli, start_intake, stop_workers
from test_operations import get, samples, until

TOOLS = '''"""A limited tool for the test's workers."""

from agentledger import ToolFailure, tool


@tool(read_only=True, limits=[{"key": "svc:slow", "max": 1}])
def ask_slow(n: int) -> str:
    """Ask the slow service."""
    if n == 0:
        raise ToolFailure("rate_limited", "slow down", retry_after_s=6)
    return "ok"
'''
SPEC = """task: two calls to a limited service
tools: [limited_tools]
principal: {id: u, tenant: t}
model:
  scripted:
    - tool_use:
        - {id: c0, name: ask_slow, input: {n: 0}}
        - {id: c1, name: ask_slow, input: {n: 1}}
    - end_turn: done
"""


def test_status_and_metrics_say_what_a_waiting_call_waits_for(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "limited_tools.py").write_text(TOOLS)
    (tmp_path / "spec.yaml").write_text(SPEC)
    publisher = cli.publisher()
    workers = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--tools", "limited_tools", "--tool-path", str(tmp_path),
         "--metrics-port", "0"],
        cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE,
    )  # fmt: skip
    intake = None
    try:
        assert workers.stdout is not None
        said = re.search(r"metrics on port (\d+)", workers.stdout.readline())
        assert said, "the workers did not start"
        port = int(said.group(1))
        intake = start_intake(cli)
        run = cli("submit", "--as", publisher, tmp_path / "spec.yaml").stdout.strip()

        def waiting_line() -> str | None:
            shown = cli("status", run).stdout
            return next((ln for ln in shown.splitlines() if "waits for limit:svc:slow" in ln), None)

        line = until("status naming the key", waiting_line, timeout_s=30)
        # the holders when it asked (c0 held its slot then); the back-off's end
        assert re.search(r"\([01] of 1 holding\); backed off until 20\d\d-", line), line
        waits = [c["waits"] for c in json.loads(cli("status", run, "--json").stdout)["tool_calls"]
                 if "waits" in c]  # fmt: skip
        assert waits and waits[0]["for"] == ["limit:svc:slow"], waits
        scraped = samples(get(port, "/metrics")[1])
        key = '{key="limit:svc:slow"}'
        assert scraped[f"agentledger_limit_waiters{key}"] == 1, scraped
        assert scraped[f"agentledger_limit_holders{key}"] == 0
        assert scraped[f"agentledger_limit_closed_until_seconds{key}"] > time.time()
        cli.wait_ended([run], 60)
        assert json.loads(cli("status", run, "--json").stdout)["status"] == "completed"
    finally:
        stop_workers([workers, *([intake] if intake else [])])
