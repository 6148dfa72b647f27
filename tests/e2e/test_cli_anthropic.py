"""The inventory and fix_tests examples with `model: anthropic`, run by the CLI
through the real anthropic SDK against the local stand-in of the Messages API
(in this process, on loopback). What the stand-in received shows the protocol
kept: every tool_result answers the previous tool_use ids, thinking blocks come
back byte for byte, no secret is ever sent, a call cut off by max_tokens never
runs. Then `context` rebuilds each request exactly, `raw` is the only way to the
stored entries, and `replay --rerun` re-drives the run from its log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, by_call, copy_example, of_type

from tests.standin.messages_api import (
    MessagesStandin,
    RedactedThinking,
    Reply,
    Streamed,
    Text,
    Thinking,
    ToolUse,
    cut,
)

KEY = "sk-ant-e2e-standin-7f3a9c1e5b"
SECRET_VAR, SECRET = "FIX_TESTS_DEPLOY_TOKEN", "dpl-4f1c9e2a7b3d8e6f"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
THINK_1 = Thinking('Stock first: "A1" — naïve guesses fail.\n\tLook it up.', "c2lnLWludi0x+/==")
THINK_2 = Thinking("3 available; reserve 2.", "c2lnLWludi0y")
HIDDEN = RedactedThinking("EmwKAhgBEgy3va3pzix/AbC==")
INVENTORY: tuple[Reply, ...] = (
    Streamed(
        (THINK_1, Text("Let me look."), ToolUse("toolu_inv_1", "lookup_stock", {"sku": "A1"})),
        stop_reason="tool_use",
    ),
    Streamed(
        (THINK_2, HIDDEN, ToolUse("toolu_inv_2", "reserve_stock", {"sku": "A1", "qty": 2})),
        stop_reason="tool_use",
    ),
    Streamed((Text("3 were available; 2 are reserved."),)),
)
FIXED = '"""Tiny arithmetic helpers."""\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n'
FIX: tuple[Reply, ...] = (
    Streamed(
        (Thinking("Run the tests first.", "c2lnLWZpeC0x"), ToolUse("toolu_fix_1", "run_tests", {})),
        stop_reason="tool_use",
    ),
    Streamed(
        (
            Text("Reading the code and the deploy settings."),
            ToolUse("toolu_fix_2", "read_file", {"path": "calc.py"}),
            ToolUse("toolu_fix_3", "read_file", {"path": "deploy.env"}),
        ),
        stop_reason="tool_use",
    ),
    cut(
        (
            Text("Writing the fix."),
            ToolUse("toolu_fix_4", "write_file", {"path": "calc.py", "content": FIXED}, cut_at=30),
        )
    ),
    Streamed(
        (ToolUse("toolu_fix_5", "write_file", {"path": "calc.py", "content": FIXED}),),
        stop_reason="tool_use",
    ),
    Streamed((ToolUse("toolu_fix_6", "run_tests", {}),), stop_reason="tool_use"),
    Streamed((Text("tests pass now"),)),
)


@dataclass
class Ran:
    cli: Cli
    example: Path
    api: MessagesStandin
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        return str(self.summary["run_id"])

    def bodies(self) -> list[dict[str, Any]]:
        return self.api.bodies()


def run_on_standin(cli: Cli, example: Path, spec: str, replies: tuple[Reply, ...]) -> Iterator[Ran]:
    with MessagesStandin() as api:
        api.play(*replies)
        cli.env |= {
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": api.url,
            "NO_PROXY": "127.0.0.1,localhost",
            SECRET_VAR: SECRET,
        }
        code, summary = cli.run_json(example / spec)
        yield Ran(cli, example, api, code, summary, cli.events(summary["run_id"]))


@pytest.fixture(scope="module")
def inventory(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Ran]:
    cli = make_cli(tmp_path_factory.mktemp("inventory_anthropic"))
    example = copy_example("inventory", cli.cwd)
    yield from run_on_standin(cli, example, "spec_anthropic.yaml", INVENTORY)


@pytest.fixture(scope="module")
def fix(tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]) -> Iterator[Ran]:
    cli = make_cli(tmp_path_factory.mktemp("fix_anthropic"))
    example = copy_example("fix_tests", cli.cwd)
    (example / "ws" / "deploy.env").write_text(
        f"DEPLOY_TOKEN={SECRET}\nAWS_ACCESS_KEY_ID={AWS_KEY}\nREGION=eu-west-1\n"
    )
    yield from run_on_standin(cli, example, "spec_anthropic.yaml", FIX)


def without_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without their cache breakpoints."""
    return [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in messages
    ]


def tool_uses(message: dict[str, Any]) -> list[str]:
    return [b["id"] for b in message["content"] if b["type"] == "tool_use"]


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message["content"] if b["type"] == "tool_result"]


def sent_ids(reply: Reply) -> list[str]:
    assert isinstance(reply, Streamed)
    return [b.id for b in reply.content if isinstance(b, ToolUse)]


@pytest.mark.parametrize(
    ("name", "calls"),
    [
        ("inventory", ["toolu_inv_1", "toolu_inv_2"]),
        (
            "fix",
            [
                "toolu_fix_1",
                "toolu_fix_2",
                "toolu_fix_3",
                "toolu_fix_4",
                "toolu_fix_5",
                "toolu_fix_6",
            ],
        ),
    ],
)
def test_the_example_completes_through_the_sdk_with_one_request_per_turn(
    name: str, calls: list[str], request: pytest.FixtureRequest
) -> None:
    ran: Ran = request.getfixturevalue(name)
    assert ran.code == 0, ran.summary
    assert ran.summary["status"] == "completed"
    assert [c["call_id"] for c in ran.summary["tool_calls"]] == calls
    assert (
        len(ran.api.requests)
        == ran.summary["turns"]
        == len(INVENTORY if name == "inventory" else FIX)
    )
    for recorded in ran.api.requests:
        assert (recorded.method, recorded.path) == ("POST", "/v1/messages")
        assert recorded.headers["authorization"] == f"Bearer {KEY}"
        assert recorded.body["stream"] is True and recorded.body["model"] == "claude-sonnet-4-5"
        assert recorded.body["thinking"] == {"type": "enabled", "budget_tokens": 4000}


@pytest.mark.parametrize("name", ["inventory", "fix"])
def test_every_tool_result_answers_the_tool_use_ids_of_the_reply_before(
    name: str, request: pytest.FixtureRequest
) -> None:
    ran: Ran = request.getfixturevalue(name)
    replies = INVENTORY if name == "inventory" else FIX
    for k, body in enumerate(ran.bodies()[1:], start=1):
        *_, assistant, user = body["messages"]
        assert assistant["role"] == "assistant" and user["role"] == "user"
        assert tool_uses(assistant) == sent_ids(replies[k - 1])
        assert [r["tool_use_id"] for r in tool_results(user)] == sent_ids(replies[k - 1])


def test_thinking_blocks_are_sent_back_byte_for_byte(inventory: Ran) -> None:
    second, third = inventory.bodies()[1:3]
    think_1 = {"type": "thinking", "thinking": THINK_1.thinking, "signature": THINK_1.signature}
    think_2 = {"type": "thinking", "thinking": THINK_2.thinking, "signature": THINK_2.signature}
    hidden = {"type": "redacted_thinking", "data": HIDDEN.data}
    assert second["messages"][1]["content"][0] == think_1
    assert third["messages"][1]["content"][0] == think_1
    assert third["messages"][3]["content"][:2] == [think_2, hidden]
    raw = inventory.api.requests[2].raw.decode()
    assert json.dumps(THINK_1.signature) in raw and json.dumps(HIDDEN.data) in raw


def test_a_tool_call_cut_off_by_max_tokens_is_never_executed_and_the_model_is_told(
    fix: Ran,
) -> None:
    assert by_call(fix.events, "toolu_fix_4") == ["ToolCallProposed", "ToolCallRejected"]
    [rejected] = [
        r for r in of_type(fix.events, "ToolCallRejected") if r["call_id"] == "toolu_fix_4"
    ]
    assert "cut off by max_tokens" in rejected["error"]["message"]
    after = fix.bodies()[3]["messages"]
    [answer] = tool_results(after[-1])
    assert answer["tool_use_id"] == "toolu_fix_4" and answer["is_error"] is True
    assert "not executed" in answer["content"]
    assert (
        by_call(fix.events, "toolu_fix_5")[-1] == "ToolCallSucceeded"
    )  # the call sent again in full


def test_no_secret_value_reaches_the_model_the_log_or_the_cli_output(fix: Ran) -> None:
    raw_requests = b"".join(r.raw for r in fix.api.requests).decode()
    assert SECRET not in raw_requests and AWS_KEY not in raw_requests and KEY not in raw_requests
    assert f"DEPLOY_TOKEN=[REDACTED:{SECRET_VAR}]" in raw_requests
    assert "[REDACTED:aws_access_key_id]" in raw_requests
    raw_log = fix.cli("raw", fix.run_id)
    assert raw_log.returncode == 0 and "not redacted" in raw_log.stderr
    assert f"[REDACTED:{SECRET_VAR}]" in raw_log.stdout  # redacted before it was appended
    for args in (
        ("tail", "--run", fix.run_id),
        ("tail", "--run", fix.run_id, "--json"),
        ("status", fix.run_id),
    ):
        done = fix.cli(*args)
        assert done.returncode == 0 and done.stdout
        assert (
            SECRET not in done.stdout + raw_log.stdout
            and AWS_KEY not in done.stdout + raw_log.stdout
        )


@pytest.mark.parametrize("name", ["inventory", "fix"])
def test_context_rebuilds_exactly_what_each_request_sent_and_verifies_its_hash(
    name: str, request: pytest.FixtureRequest
) -> None:
    ran: Ran = request.getfixturevalue(name)
    recorded = of_type(ran.events, "ModelRequested")
    assert all(len(r["context_hash"]) == 64 and r["context_tokens"] > 0 for r in recorded)
    for turn, body in enumerate(ran.bodies(), start=1):
        done = ran.cli("context", ran.run_id, "--turn", str(turn), "--json")
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        assert shown["verified"] is True and shown["hash"] == recorded[turn - 1]["context_hash"]
        wire = shown["wire"]  # the view as the adapter sends it: cache breakpoints and all
        assert wire["messages"] == body["messages"]
        assert wire["tools"] == body["tools"] and wire["system"] == body["system"]
        assert shown["request"]["messages"] == without_marks(body["messages"])
    text = ran.cli("context", ran.run_id, "--turn", "2")
    assert text.returncode == 0 and "verified" in text.stdout and "[tool_result]" in text.stdout


def test_a_rerun_on_the_recorded_replies_matches_and_never_calls_the_api(inventory: Ran) -> None:
    before = len(inventory.api.requests)
    done = inventory.cli("replay", inventory.run_id, "--rerun", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["divergence"] is None and report["status"] == "completed"
    assert report["recorded"] == inventory.run_id and report["rerun"] != inventory.run_id
    assert report["compared"] >= 10
    assert len(inventory.api.requests) == before
    old = inventory.cli("replay", inventory.run_id)  # the log check is still there
    assert old.returncode == 0 and "log ok" in old.stdout


def test_a_rerun_after_the_stock_changed_reports_the_divergence_at_the_reservation(
    inventory: Ran,
) -> None:
    stock = inventory.example / "ws" / "stock.json"
    original = stock.read_text()
    data = json.loads(original)
    data["A1"]["available"] = 1
    stock.write_text(json.dumps(data))
    try:
        done = inventory.cli("replay", inventory.run_id, "--rerun")
    finally:
        stock.write_text(original)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIVERGED" in done.stdout
    recorded_line, rerun_line = [line for line in done.stdout.splitlines() if "(seq" in line]
    assert "ToolCallSucceeded" in recorded_line and "toolu_inv_2" in recorded_line
    assert "ToolCallFailed" in rerun_line and '"error": "conflict"' in rerun_line


def test_context_exits_1_when_the_view_no_longer_matches_its_recorded_hash(inventory: Ran) -> None:
    tools = inventory.example / "inventory_tools.py"
    original = tools.read_text()
    tools.write_text(original.replace("Available quantity for a SKU", "How many of a SKU"))
    try:
        done = inventory.cli("context", inventory.run_id, "--turn", "1")
    finally:
        tools.write_text(original)
    assert done.returncode == 1
    assert "MISMATCH" in done.stdout and "context hash mismatch at turn 1" in done.stderr
