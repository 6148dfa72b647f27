"""MCP servers through the CLI as an operator runs them (`agentledger run SPEC
--mcp FILE`, a scripted model): reads and writes through the npm reference
filesystem server, serialised by our locks and each done once; path escapes
refused; a server that dies mid-write leaves the call unknown — resolved by the
operator's lookup tool, or waiting for a human — never re-run; a cancelled call
gets `notifications/cancelled` and its server is stopped after the grace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from e2ekit import AGENTLEDGER, Cli, by_call, of_type, start_intake, stop_workers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ : the shared MCP kit

from mcp_servers.kit import fs_server, ledger_stdio, wait_for  # noqa: E402

BIG = "0123456789" * 900 + "tail-of-the-big-file"
PRINCIPAL = {
    "id": "alice",
    "tenant": "t1",
    "scopes": ["fs:read", "fs:write", "orders:read", "orders:write"],
}


def setup(
    folder: Path, servers: dict[str, Any], turns: list[Any], *, tools: list[str]
) -> tuple[Path, Path]:
    (folder / "ws").mkdir()
    (folder / "servers.yaml").write_text(yaml.safe_dump({"servers": servers}))
    spec = {
        # in place: the calls name the workspace's files by their absolute paths
        "task": "work through MCP", "workspace": "./ws", "copy_workspace": False, "tools": tools,
        "principal": PRINCIPAL,
        "budgets": {"max_turns": 10}, "model": {"scripted": turns},
        "policies": {"cancel_grace_s": 1.0},
    }  # fmt: skip
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
    return folder / "spec.yaml", folder / "servers.yaml"


def use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "input": args}


STDERR: dict[str, str] = {}  # the last run's, by test


def run_json(
    cli: Cli, spec: Path, servers: Path
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    done = cli("run", "--json", spec, "--mcp", servers)
    assert done.stdout.strip(), f"no summary; stderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    STDERR["last"] = done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return done.returncode, summary, cli.events(summary["run_id"])


def seq_of(events: list[dict[str, Any]], type_: str, call_id: str) -> int:
    return next(
        e["seq"] for e in events if e["type"] == type_ and e["data"].get("call_id") == call_id
    )


def test_reads_and_writes_through_the_filesystem_server_are_serialised_and_each_done_once(
    cli: Cli, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    turns = [
        {"tool_use": [
            use("w1", "fs__write_file", path="notes.txt", content="one"),
            use("w2", "fs__write_file", path=f"{ws}/notes.txt", content="two"),
            use("r1", "fs__read_text_file", path="notes.txt"),
        ]},
        {"tool_use": [use("r2", "fs__read_text_file", path=f"{ws}/notes.txt"), use("l1", "fs__list_directory", path=str(ws))]},
        {"tool_use": [use("w3", "fs__write_file", path="big.txt", content=BIG), use("r3", "fs__read_text_file", path="big.txt")]},
        {"tool_use": [use("o1", "read_output", ref="r3", offset=6000)]},
        {"end_turn": "wrote notes.txt"},
    ]  # fmt: skip
    spec, servers = setup(tmp_path, {"fs": fs_server()}, turns, tools=["mcp:fs"])
    # the tools take paths in the workspace, given as absolute paths: our own turn 1 uses relative ones
    # for w1 and r1 on purpose: the server resolves them against its folder, the workspace

    code, summary, events = run_json(cli, spec, servers)

    assert code == 0 and summary["status"] == "completed", summary
    assert (ws / "notes.txt").read_text() == "two"
    for call in ("w1", "w2", "r1", "r2", "l1"):
        assert by_call(events, call).count("ToolCallStarted") == 1, (call, by_call(events, call))
        assert by_call(events, call)[-1] == "ToolCallSucceeded", (call, by_call(events, call))
    # one file, one lock: w2 waits for w1, r1 for w2, in proposal order
    assert seq_of(events, "ToolCallSucceeded", "w1") < seq_of(events, "ToolCallStarted", "w2")
    assert seq_of(events, "ToolCallSucceeded", "w2") < seq_of(events, "ToolCallStarted", "r1")
    [read] = [e for e in of_type(events, "ToolCallSucceeded") if e["call_id"] == "r2"]
    assert read["output"] == "two"
    validated = {e["call_id"]: e for e in of_type(events, "ToolCallValidated")}
    assert validated["w1"]["writes"] == validated["w2"]["writes"] == [f"file:{ws}/notes.txt"]
    assert validated["w1"]["op_key"] and validated["r1"]["op_key"] is None
    # the output cap and read_output, as for every tool: the log keeps it whole
    assert validated["r3"]["output_cap"] == 4000
    outputs = {e["call_id"]: e["output"] for e in of_type(events, "ToolCallSucceeded")}
    assert outputs["r3"] == BIG and "tail-of-the-big-file" in outputs["o1"]


def test_path_escapes_are_refused_before_anything_is_sent(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    turns = [
        {"tool_use": [
            use("e1", "fs__read_text_file", path="../secret.txt"),
            use("e2", "fs__read_text_file", path=str(tmp_path / "secret.txt")),
            use("e3", "fs__write_file", path="../made.txt", content="x"),
            use("e4", "fs__move_file", source="a", destination="/tmp/away"),
            use("e5", "fs__read_multiple_files", paths=["ok.txt", "/etc/passwd"]),
        ]},
        {"end_turn": "tried"},
    ]  # fmt: skip
    spec, servers = setup(tmp_path, {"fs": fs_server()}, turns, tools=["mcp:fs"])

    code, summary, events = run_json(cli, spec, servers)

    rejected = {e["call_id"]: e["error"] for e in of_type(events, "ToolCallRejected")}
    assert set(rejected) == {"e1", "e2", "e3", "e4", "e5"}
    assert all("outside the workspace" in r["message"] for r in rejected.values()), rejected
    assert not of_type(events, "ToolCallStarted")
    assert not (tmp_path / "made.txt").exists()
    assert "s3cret" not in json.dumps(events)


def test_a_tool_the_spec_did_not_ask_for_is_not_offered_and_is_refused(
    cli: Cli, tmp_path: Path
) -> None:
    turns = [{"tool_use": [use("x1", "ledger__get_order", order_id="A")]}, {"end_turn": "ok"}]
    spec, servers = setup(
        tmp_path, {"ledger": ledger_stdio()}, turns, tools=["ledger__place_order"]
    )

    code, summary, events = run_json(cli, spec, servers)

    [rejected] = of_type(events, "ToolCallRejected")
    assert rejected["error"]["code"] == "unknown_tool"
    assert "ToolCallStarted" not in by_call(events, "x1")
    assert code == 0


def test_a_server_dying_mid_write_leaves_it_unknown_and_a_lookup_resolves_it(
    cli: Cli, tmp_path: Path
) -> None:
    # the lookup is asked once the call's deadline has passed (a write could still land
    # before it): a deadline of 8 s, not the default 30 s, is what the run waits out
    policy = {
        "crash": {
            "writes": ["order:{order_id}"],
            "lookup": {"tool": "order_done", "args": {"op_key": "{op_key}"}},
            "timeout_s": 8,
        },
        "order_done": {"read_only": True},
    }
    turns = [{"tool_use": [use("k1", "ledger__crash", order_id="K")]}, {"end_turn": "placed"}]
    spec, servers = setup(tmp_path, {"ledger": ledger_stdio(**policy)}, turns, tools=["mcp:ledger"])

    code, summary, events = run_json(cli, spec, servers)

    assert code == 0 and summary["status"] == "completed", summary
    assert by_call(events, "k1").count("ToolCallStarted") == 1
    assert "ToolCallOutcomeUnknown" in by_call(events, "k1")
    [unknown] = of_type(events, "ToolCallOutcomeUnknown")
    assert "went down mid-call" in unknown["reason"] or "closed the connection" in unknown["reason"]
    assert (
        json.loads((tmp_path / "ws" / "orders.json").read_text())["K"]["times"] == 1
    )  # never re-run
    # while the server was down the workers served the smaller tool set, then the whole one again
    assert STDERR["last"].count("(MCP servers changed)") >= 2, STDERR["last"]


def test_a_server_dying_mid_write_without_a_lookup_waits_for_a_human(
    cli: Cli, tmp_path: Path
) -> None:
    turns = [{"tool_use": [use("k1", "ledger__crash", order_id="K")]}, {"end_turn": "placed"}]
    spec, servers = setup(
        tmp_path,
        {"ledger": ledger_stdio(crash={"writes": ["order:{order_id}"]})},
        turns,
        tools=["mcp:ledger"],
    )

    code, summary, events = run_json(cli, spec, servers)

    assert code == 6 and summary["status"] == "awaiting_human", summary
    assert by_call(events, "k1")[-1] == "ToolCallOutcomeUnknown"
    assert by_call(events, "k1").count("ToolCallStarted") == 1
    assert of_type(events, "RunEscalated")[0]["reason"] == "outcome_unknown"
    assert json.loads((tmp_path / "ws" / "orders.json").read_text())["K"]["times"] == 1


def test_a_cancelled_call_gets_notifications_cancelled_and_its_server_is_stopped(
    cli: Cli, tmp_path: Path
) -> None:
    turns = [
        {"tool_use": [use("s1", "ledger__slow", seconds=120, order_id="S")]},
        {"end_turn": "slept"},
    ]
    spec, servers = setup(tmp_path, {"ledger": ledger_stdio()}, turns, tools=["mcp:ledger"])
    ws = tmp_path / "ws"
    proc = subprocess.Popen(
        [*AGENTLEDGER, "run", "--json", str(spec), "--mcp", str(servers)],
        cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: (ws / "slow.count").exists(), 120, "the slow call starting")
        [run_id] = cli.runs()
        assert cli("cancel", run_id, "enough").returncode == 0
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 5, err
    events = cli.events(run_id)
    assert by_call(events, "s1")[-1] == "ToolCallForceTerminated", by_call(events, "s1")
    assert (ws / "cancelled.txt").read_text() == "S"  # the server saw notifications/cancelled
    assert "S" not in json.loads(
        (ws / "orders.json").read_text() if (ws / "orders.json").exists() else "{}"
    )


def test_a_spec_asking_for_a_server_the_file_lacks_is_refused_with_its_line(
    cli: Cli, tmp_path: Path
) -> None:
    spec, servers = setup(
        tmp_path, {"ledger": ledger_stdio()}, [{"end_turn": "x"}], tools=["mcp:git", "ledger__nope"]
    )

    done = cli("run", spec, "--mcp", servers)

    assert done.returncode == 2, done.stderr
    assert (
        "tools.0: no MCP server 'git'" in done.stderr
        and "tools.1: no MCP tool 'ledger__nope'" in done.stderr
    )
    assert "Traceback" not in done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers: {x: {command: [a], url: 'http://127.0.0.1:1/'}}")
    done = cli("run", spec, "--mcp", bad)
    assert (
        done.returncode == 2
        and "exactly one of `command`" in done.stderr
        and "Traceback" not in done.stderr
    )


def test_workers_with_a_servers_file_serve_runs_submitted_for_the_same_fingerprint(
    cli: Cli, tmp_path: Path
) -> None:
    turns = [
        {"tool_use": [use("p1", "ledger__place_order", order_id="W", qty=4)]},
        {"end_turn": "placed"},
    ]
    spec, servers = setup(tmp_path, {"ledger": ledger_stdio()}, turns, tools=["mcp:ledger"])
    workers = subprocess.Popen(
        [*AGENTLEDGER, "workers", "--queue", "mcpq", "--mcp", str(servers)],
        cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    intakes = []
    try:
        assert workers.stdout is not None
        up = workers.stdout.readline()
        assert "workers up" in up, (up, workers.poll())
        intakes.append(start_intake(cli))
        done = cli(
            "submit", "--as", cli.publisher(), "--json", spec, "--queue", "mcpq", "--mcp", servers
        )
        assert done.returncode == 0, done.stderr
        submitted = json.loads(done.stdout.strip().splitlines()[-1])
        assert f"tool set {submitted['toolset']}" in up  # the same servers, the same fingerprint
        run_id = submitted["run_id"]
        wait_for(lambda: cli("status", run_id).returncode == 0, 120, "the run completing")
    finally:
        stop_workers(intakes)
        workers.terminate()
        try:
            workers.wait(30)
        except subprocess.TimeoutExpired:
            workers.kill()
            workers.wait()
    assert json.loads((tmp_path / "ws" / "orders.json").read_text())["W"]["qty"] == 4
