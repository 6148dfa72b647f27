"""What the npm reference server-everything asks our client during a call, as an
operator runs it (`agentledger run SPEC --mcp FILE`, the scripted model):
sampling (`trigger-sampling-request`) answered by the run's own model —
the script's `sampled` answers — recorded (`ToolSampledModel`) and counted in
the run's budget, refused when the budget cannot pay for it; elicitation
(`trigger-elicitation-request`) put to a person as the run's escalation and
answered by `agentledger reply`, while `run` goes on following the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from e2ekit import AGENTLEDGER, Cli, by_call, of_type

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ : the shared MCP kit

from mcp_servers.kit import npm_server  # noqa: E402

POLICY = {
    "trigger-sampling-request": {"read_only": True},
    "trigger-elicitation-request": {"read_only": True, "timeout_s": 120},
}


def setup(folder: Path, turns: list[Any], **extra: Any) -> tuple[Path, Path]:
    (folder / "ws").mkdir()
    servers = {"ev": {**npm_server("server-everything", "stdio"), "tools": POLICY}}
    (folder / "servers.yaml").write_text(yaml.safe_dump({"servers": servers}))
    spec = {
        "task": "ask through MCP", "workspace": "./ws", "tools": ["mcp:ev"],
        "principal": {"id": "alice", "tenant": "t1"},
        "budgets": {"max_turns": 4, **extra.pop("budgets", {})},
        "model": {"scripted": turns, **extra},
    }  # fmt: skip
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
    return folder / "spec.yaml", folder / "servers.yaml"


def sample_turns() -> list[Any]:
    call = {
        "id": "s1",
        "name": "ev__trigger-sampling-request",
        "input": {"prompt": "hi", "maxTokens": 40},
    }
    return [{"tool_use": [call]}, {"end_turn": "sampled"}]


def run_json(
    cli: Cli, spec: Path, servers: Path
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    done = cli("run", "--json", spec, "--mcp", servers)
    assert "Traceback" not in done.stderr, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return done.returncode, summary, cli.events(summary["run_id"])


def test_a_servers_sampling_request_is_answered_by_the_runs_model_recorded_and_counted(
    cli: Cli, tmp_path: Path
) -> None:
    spec, servers = setup(tmp_path, sample_turns(), sampled=["a scripted sample"])

    code, summary, events = run_json(cli, spec, servers)

    assert code == 0 and summary["status"] == "completed", summary
    [sampled] = of_type(events, "ToolSampledModel")
    assert (sampled["call_id"], sampled["server"], sampled["sample"]) == ("s1", "ev", 1)
    assert sampled["text"] == "a scripted sample" and sampled["max_tokens"] == 40
    assert "context: hi" in sampled["prompt"] and sampled["usage"]["output_tokens"] > 0
    [out] = [e["output"] for e in of_type(events, "ToolCallSucceeded") if e["call_id"] == "s1"]
    assert "a scripted sample" in out
    # recorded while the call ran: between its start and its outcome
    order = by_call(events, "s1")
    assert (
        order.index("ToolCallStarted")
        < order.index("ToolSampledModel")
        < order.index("ToolCallSucceeded")
    )


def test_a_sampling_request_the_budget_cannot_pay_for_is_refused_and_nothing_is_spent(
    cli: Cli, tmp_path: Path
) -> None:
    # the first turn's reply spends the output budget: the server's request may not add to it
    spec, servers = setup(
        tmp_path, sample_turns(), sampled=["never said"], budgets={"max_output_tokens": 30}
    )

    code, summary, events = run_json(cli, spec, servers)

    assert not of_type(events, "ToolSampledModel"), summary
    [out] = [e["output"] for e in of_type(events, "ToolCallSucceeded") if e["call_id"] == "s1"] or [
        e["error"]["message"] for e in of_type(events, "ToolCallFailed") if e["call_id"] == "s1"
    ]
    assert "sampling refused: the run has no output tokens left" in json.dumps(out), out
    assert "of max_output_tokens 30 used" in json.dumps(out), out
    assert "never said" not in json.dumps(events[1:])  # in the spec (RunCreated) only


def test_a_servers_question_waits_for_a_persons_reply_while_run_follows(
    cli: Cli, tmp_path: Path
) -> None:
    call = {"id": "q1", "name": "ev__trigger-elicitation-request", "input": {}}
    spec, servers = setup(tmp_path, [{"tool_use": [call]}, {"end_turn": "asked"}])
    proc = subprocess.Popen(
        [*AGENTLEDGER, "run", "--json", str(spec), "--mcp", str(servers)],
        cwd=cli.cwd, env=cli.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        run_id = _wait_run(cli)
        asked = cli.wait_events(run_id, lambda es: bool(of_type(es, "RunEscalated")), 120)
        [question] = of_type(asked, "RunEscalated")
        assert question["reason"] == "tool_question" and "during call q1" in question["detail"]
        assert proc.poll() is None  # `run` goes on following: its call waits for the answer
        assert question["question"]["required"] == ["name"]  # the answer's schema, recorded
        wrong = cli("reply", run_id, json.dumps({"name": 5}))
        assert wrong.returncode == 2, wrong.stderr
        assert (
            "the tool's question is not answered: name: 5 is not of type 'string'" in wrong.stderr
        )
        assert "nothing was sent" in wrong.stderr
        answer = json.dumps({"name": "Ada Lovelace", "check": True})
        replied = cli("reply", run_id, answer)
        assert replied.returncode == 0, replied.stderr
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    events = cli.events(run_id)
    [result] = [e["output"] for e in of_type(events, "ToolCallSucceeded") if e["call_id"] == "q1"]
    assert "Ada Lovelace" in json.dumps(result) and "accept" in json.dumps(result), result


def _wait_run(cli: Cli) -> str:
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = cli.runs()
        if runs:
            return runs[0]
        time.sleep(0.3)
    raise AssertionError("no run within 120s")
