"""What a tool prints stays out of the worker's output: `agentledger run`
prints none of it, the log keeps it on the outcome event, and a secret in it is
redacted there like anywhere else."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml
from e2ekit import Cli, of_type

TOOLS = '''
import os, sys
from agentledger import ToolContext, tool

@tool(read_only=True)
def chatty(ctx: ToolContext) -> dict:
    """Prints a line, a secret and a warning."""
    print("CHATTY-LINE from the tool")
    print("token is", os.environ["CHATTY_DEPLOY_TOKEN"])
    print("CHATTY-WARNING", file=sys.stderr)
    return {"ok": True}
'''


def test_a_tools_prints_are_in_the_log_redacted_and_not_in_the_workers_output(
    cli: Cli, tmp_path: Path
) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    cli.env["CHATTY_DEPLOY_TOKEN"] = token
    (tmp_path / "chatty_tools.py").write_text(TOOLS)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "task": "print things",
                "tools": ["chatty_tools"],
                "secrets": ["CHATTY_DEPLOY_TOKEN"],
                "principal": {"id": "p", "tenant": "t", "scopes": []},
                "model": {
                    "scripted": [
                        {"tool_use": [{"id": "c1", "name": "chatty", "input": {}}]},
                        {"end_turn": "done"},
                    ]
                },
            }
        )
    )
    for args in (("run", spec), ("run", "--json", spec)):
        done = cli(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        printed = done.stdout + done.stderr
        assert "CHATTY-LINE" not in printed and "CHATTY-WARNING" not in printed
        assert token not in printed
    [ok, *_] = of_type(cli.events(cli.runs()[0]), "ToolCallSucceeded")
    assert ok["stdout"] == "CHATTY-LINE from the tool\ntoken is [REDACTED:CHATTY_DEPLOY_TOKEN]\n"
    assert ok["stderr"] == "CHATTY-WARNING\n"
    raw = cli("raw", cli.runs()[0])
    assert raw.returncode == 0 and token not in raw.stdout  # redacted before it was appended


BIG_TOOLS = '''
from agentledger import ToolContext, tool

@tool(read_only=True, output_cap=None)
def flood(chars: int, ctx: ToolContext) -> str:
    """Returns `chars` characters and declares no output cap."""
    return "".join(f"{i:09d}\\n" for i in range(0, chars, 10))[:chars]
'''
FLOOD = 30_000_000


def test_a_30_mb_result_is_a_capped_event_read_on_by_read_output_and_never_sent_whole(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "big_tools.py").write_text(BIG_TOOLS)
    last = FLOOD - 4000
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "task": "read a flood",
                "tools": ["big_tools"],
                "principal": {"id": "p", "tenant": "t", "scopes": []},
                "model": {
                    "scripted": [
                        {"tool_use": [{"id": "f1", "name": "flood", "input": {"chars": FLOOD}}]},
                        {
                            "tool_use": [
                                {
                                    "id": "r1",
                                    "name": "read_output",
                                    "input": {"ref": "f1", "offset": last},
                                }
                            ]
                        },
                        {"end_turn": "done"},
                    ]
                },
            }
        )
    )

    done = cli("run", "--json", spec)

    assert done.returncode == 0, done.stdout + done.stderr
    events = cli.events(cli.runs()[0])
    flood, read = of_type(events, "ToolCallSucceeded")
    assert flood["overflow"]["chars"] == FLOOD and len(flood["output"]) < 256 << 10
    assert flood["output"].startswith("000000000\n000000010\n")
    assert read["output"].startswith(f"{last:09d}\n") and "this is the end" in read["output"]
    tokens = [r["context_tokens"] for r in of_type(events, "ModelRequested")]
    assert all(t < 5_000 for t in tokens), tokens  # not 7.5 M: the default cap of 4,000 characters
