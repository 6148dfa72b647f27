"""The inventory and fix_tests examples with `model: openai` (their spec_openai.yaml),
run by the CLI through the real openai SDK against the local stand-in of the Chat
Completions API (vLLM-like, then Ollama-like), with the deployment listing the
stand-in as a model endpoint: both complete on real acceptance checks, every tool
answer follows its call, no secret of the workspace reaches the model, and a call
cut by `length` never runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, by_call, copy_example, of_type

from tests.standin.chat_completions import Call, Chat, ChatStandin, Flavour

KEY = "sk-proj-e2e-examples-2c7e9a4f1b8d3e6a5c0f"
SECRET_VAR, SECRET = "FIX_TESTS_DEPLOY_TOKEN", "dpl-4f1c9e2a7b3d8e6f"
FIXED = '"""Tiny arithmetic helpers."""\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n'


def inventory(flavour: Flavour) -> tuple[Chat, ...]:
    return (
        Chat(
            content="Let me look.",
            reasoning="Stock first.",
            calls=(Call("lookup_stock", {"sku": "A1"}, id="inv_1"),),
            flavour=flavour,
        ),
        Chat(calls=(Call("reserve_stock", {"sku": "A1", "qty": 2}, id="inv_2"),), flavour=flavour),
        Chat(content="3 were available; 2 are reserved.", flavour=flavour),
    )


def fix(flavour: Flavour) -> tuple[Chat, ...]:
    write = {"path": "calc.py", "content": FIXED}
    return (
        Chat(calls=(Call("run_tests", "", id="fix_1"),), flavour=flavour),
        Chat(
            content="Reading.",
            calls=(
                Call("read_file", {"path": "calc.py"}, id="fix_2"),
                Call("read_file", {"path": "deploy.env"}, id="fix_3"),
            ),
            flavour=flavour,
        ),
        Chat(
            content="Writing the fix.",
            calls=(Call("write_file", write, id="fix_4", cut_at=30),),
            finish_reason="length",
            flavour=flavour,
        ),
        Chat(calls=(Call("write_file", write, id="fix_5"),), flavour=flavour),
        Chat(calls=(Call("run_tests", {}, id="fix_6"),), flavour=flavour),
        Chat(content="tests pass now", flavour=flavour),
    )


@dataclass
class Ran:
    cli: Cli
    api: ChatStandin
    code: int
    summary: dict[str, Any]
    events: list[dict[str, Any]]


def run_example(cli: Cli, name: str, replies: tuple[Chat, ...]) -> Iterator[Ran]:
    example = copy_example(name, cli.cwd)
    if name == "fix_tests":
        (example / "ws" / "deploy.env").write_text(f"DEPLOY_TOKEN={SECRET}\nREGION=eu-west-1\n")
    with ChatStandin() as api:
        spec = example / "spec_openai.yaml"
        text = spec.read_text()
        spec.write_text(
            text.replace(
                "    model: gpt-5-mini\n", f"    model: gpt-5-mini\n    base_url: {api.url}\n"
            )
        )
        api.play(*replies)
        cli.env |= {
            "OPENAI_API_KEY": KEY, "AGENTLEDGER_MODEL_ENDPOINTS": api.url,
            "NO_PROXY": "127.0.0.1,localhost", SECRET_VAR: SECRET,
        }  # fmt: skip
        code, summary = cli.run_json(spec)
        yield Ran(cli, api, code, summary, cli.events(summary["run_id"]))


@pytest.fixture(scope="module", params=["vllm", "ollama"])
def flavour(request: pytest.FixtureRequest) -> Flavour:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def inventory_run(
    flavour: Flavour, tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Ran]:
    yield from run_example(
        make_cli(tmp_path_factory.mktemp(f"inv_{flavour}")), "inventory", inventory(flavour)
    )


@pytest.fixture(scope="module")
def fix_run(
    flavour: Flavour, tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> Iterator[Ran]:
    yield from run_example(
        make_cli(tmp_path_factory.mktemp(f"fix_{flavour}")), "fix_tests", fix(flavour)
    )


def completed(ran: Ran, turns: int) -> None:
    assert (ran.code, ran.summary["status"]) == (0, "completed"), ran.summary
    assert ran.summary["detail"].endswith("passed")
    assert len(ran.api.bodies()) == turns == ran.summary["turns"]
    for body in ran.api.bodies()[1:]:  # every tool answer follows the calls it answers
        messages = body["messages"]
        for i, m in enumerate(messages):
            if m["role"] == "assistant" and m.get("tool_calls"):
                ids = [c["id"] for c in m["tool_calls"]]
                answers = [a["tool_call_id"] for a in messages[i + 1 : i + 1 + len(ids)]]
                assert answers == ids


def test_the_inventory_example_completes_on_its_checks(inventory_run: Ran) -> None:
    completed(inventory_run, 3)


def test_the_fix_tests_example_completes_on_its_checks(fix_run: Ran) -> None:
    completed(fix_run, 6)


def test_a_call_cut_by_length_never_runs_and_no_secret_reaches_the_model(fix_run: Ran) -> None:
    assert by_call(fix_run.events, "fix_4") == ["ToolCallProposed", "ToolCallRejected"]
    assert by_call(fix_run.events, "fix_5")[-1] == "ToolCallSucceeded"
    sent = b"".join(r.raw for r in fix_run.api.requests).decode()
    assert SECRET not in sent and KEY not in sent
    assert f"DEPLOY_TOKEN=[REDACTED:{SECRET_VAR}]" in sent
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fix_run.api.requests)
    assert SECRET not in json.dumps(fix_run.events)


def test_the_reasoning_a_server_returned_is_kept_and_not_sent_back(inventory_run: Ran) -> None:
    [first] = [e for e in of_type(inventory_run.events, "ModelResponded") if e["turn"] == 1]
    [kept] = [b for b in first["content"] if b["type"] == "reasoning"]
    assert kept["text"] == "Stock first." and kept["field"] in ("reasoning_content", "reasoning")
    assert "Stock first." not in json.dumps(inventory_run.api.bodies()[1])
