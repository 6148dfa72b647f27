"""The file cases of the hostile suite (`hostile_calls.py`: path escapes and
tricks, links out of the workspace) sent through the CLI to the npm reference
filesystem server as MCP tools: each path at reads, writes, listings, info,
moves and edits. Whatever answers — our validation, the server, the sandbox —
nothing outside the workspace is read or changed, read off the ground truth:
the folder beside the workspace, the files a write could have made through a
link, and the secret's absence from everything the run recorded. Prints its counts."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from e2ekit import Cli, of_type, snapshot
from hostile_calls import LINKS, PATHS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ : the shared MCP kit

from mcp_servers.kit import fs_server  # noqa: E402

SECRET = "hostile-mcp-secret-7f3a"
PRINCIPAL = {"id": "mallory", "tenant": "t1", "scopes": ["fs:read", "fs:write"]}
PER_TURN = 40


def hostile_calls(ws: Path) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for path, _ in PATHS:
        calls += [
            ("fs__read_text_file", {"path": path}),
            ("fs__write_file", {"path": path, "content": f"written by a hostile call {path!r}"}),
            ("fs__get_file_info", {"path": path}),
            ("fs__list_directory", {"path": path}),
        ]
    for link in LINKS:
        calls += [
            ("fs__read_text_file", {"path": link}),
            ("fs__read_text_file", {"path": str(ws / link)}),
            ("fs__write_file", {"path": link, "content": "through a link"}),
            ("fs__write_file", {"path": f"{link}/made-through-a-link.txt", "content": "x"}),
            ("fs__edit_file", {"path": link, "edits": [{"oldText": "hostile", "newText": "gone"}]}),
            ("fs__list_directory", {"path": link}),
            ("fs__directory_tree", {"path": link}),
            ("fs__create_directory", {"path": f"{link}/newdir"}),
            ("fs__move_file", {"source": link, "destination": "moved"}),
            ("fs__move_file", {"source": "plain.txt", "destination": f"{link}/stolen.txt"}),
        ]
    calls += [
        ("fs__read_multiple_files", {"paths": ["plain.txt", "leak.txt", "etc_link/passwd", "outdir/secret.txt"]}),
        ("fs__search_files", {"path": ".", "pattern": "secret"}),
        ("fs__search_files", {"path": "outdir", "pattern": "*"}),
        ("fs__directory_tree", {"path": "."}),
    ]  # fmt: skip
    return calls


def test_no_hostile_file_call_through_the_mcp_filesystem_server_reaches_outside_the_workspace(
    cli: Cli, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "plain.txt").write_text("plain")
    for name, target in LINKS.items():
        os.symlink(target.format(outside=outside), ws / name)
    before_outside = snapshot(outside)
    calls = hostile_calls(ws)
    uses = [{"id": f"h{i}", "name": name, "input": args} for i, (name, args) in enumerate(calls, 1)]
    turns: list[dict[str, Any]] = [
        {"tool_use": uses[i : i + PER_TURN]} for i in range(0, len(uses), PER_TURN)
    ]
    spec = {
        # in place: the calls name the workspace (and its links) by absolute paths
        "task": "hostile file calls through MCP", "workspace": "./ws", "copy_workspace": False,
        "tools": ["mcp:fs"],
        "principal": PRINCIPAL, "model": {"scripted": [*turns, {"end_turn": "done"}]},
        "budgets": {"max_turns": len(turns) + 2, "max_consecutive_failures": 1000},
    }  # fmt: skip
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "servers.yaml").write_text(yaml.safe_dump({"servers": {"fs": fs_server()}}))

    done = cli("run", "--json", "spec.yaml", "--mcp", "servers.yaml")

    assert done.stdout.strip(), done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    tailed = cli("tail", "--run", summary["run_id"], "--json").stdout
    events = [json.loads(line) for line in tailed.split("\n") if line.strip()]  # U+2028 is data
    raw = cli("raw", summary["run_id"]).stdout
    ended = {
        e["call_id"]: e
        for t in ("ToolCallRejected", "ToolCallFailed", "ToolCallSucceeded")
        for e in of_type(events, t)
    }
    assert len(ended) == len(calls), f"{len(ended)} of {len(calls)} calls ended; {summary}"
    outcome = Counter(
        t
        for e in events
        for t in [e["type"]]
        if e["data"].get("call_id") in ended
        and t in ("ToolCallRejected", "ToolCallFailed", "ToolCallSucceeded")
    )
    print(f"\n{len(calls)} hostile file calls via MCP: {dict(outcome)}")
    for e in of_type(events, "ToolCallSucceeded"):  # what got through: harmless, inside
        call = uses[int(e["call_id"][1:]) - 1]
        print(f"  succeeded: {call['name']}({json.dumps(call['input'])[:80]})")
    # the ground truth: nothing outside the workspace was read, changed or made
    assert snapshot(outside) == before_outside
    assert (
        not (outside / "made-through-a-link.txt").exists() and not (outside / "stolen.txt").exists()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["outside", "ws", "state", "spec.yaml", "servers.yaml"]
    )
    places = {
        "events": json.dumps(events),
        "raw": raw,
        "stdout": done.stdout,
        "stderr": done.stderr,
    }
    leaked = [
        (name, mark)
        for name, text in places.items()
        for mark in (SECRET, "root:x:0:0")
        if mark in text
    ]
    assert leaked == []  # neither the secret nor /etc/passwd (through etc_link or a path)
    assert outcome["ToolCallRejected"] > 0 and outcome["ToolCallFailed"] > 0
