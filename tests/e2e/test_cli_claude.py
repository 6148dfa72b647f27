"""Claude by the book, through the CLI and the real SDK against the local
stand-in of the Messages API: server tools asked for in the spec and run by
the provider (never by our executor), every block sent back as it came, a
paused turn continued; a refusal's turn gone from the next request after a
person's reply or on the fallback model; prompt caching over a 60-turn run,
with the cost priced with and without it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2ekit import Cli, copy_example, of_type, start_workers, stop_workers, types

from agentledger.events.pricing import cost_usd, price_of
from agentledger.schemas.content import Usage
from tests.standin.messages_api import (
    TRANSCRIPTS,
    MessagesStandin,
    Reply,
    Streamed,
    Text,
    ToolUse,
    Transcript,
)

KEY = "sk-ant-e2e-standin-claude-42"
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2}


def spec(folder: Path, **anthropic: Any) -> Path:
    body = {
        "task": "How many A1 can we sell?",
        "system": "Use the stock tools; never guess a quantity.",
        "workspace": "./ws",
        "copy_workspace": True,
        "tools": ["inventory_tools"],
        "principal": {"id": "alice", "tenant": "shop-1", "scopes": ["stock:read"]},
        "budgets": {"max_turns": 70},
        "model": {"anthropic": {"model": "claude-sonnet-5-5", "max_tokens": 2048, **anthropic}},
    }
    path = folder / f"spec-{len(list(folder.glob('spec-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.fixture
def inventory(cli: Cli) -> Path:
    return copy_example("inventory", cli.cwd)


def on_standin(cli: Cli, api: MessagesStandin) -> None:
    cli.env |= {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.url, "NO_PROXY": "127.0.0.1"}


def expected(name: str) -> list[dict[str, Any]]:
    return json.loads((TRANSCRIPTS / f"{name}.json").read_text())


def test_server_tools_run_by_the_provider_go_back_verbatim_and_a_pause_is_continued(
    cli: Cli, inventory: Path
) -> None:
    with MessagesStandin() as api:
        on_standin(cli, api)
        api.play(
            Transcript.named("code_execution_tool_use"),  # the provider's code calls our tool
            Transcript.named("pause_turn_web_fetch"),
            Transcript.named("web_search_citations"),
        )
        code, summary = cli.run_json(spec(inventory, server_tools=[SEARCH, FETCH]))
        bodies = api.bodies()
    assert (code, summary["status"]) == (0, "completed"), summary
    events = cli.events(summary["run_id"])
    assert [p["call_id"] for p in of_type(events, "ToolCallProposed")] == ["toolu_tx_0004"]
    first, second, third = bodies
    assert [t["name"] for t in first["tools"]][-2:] == ["web_search", "web_fetch"]
    assert first["tools"][-1] == {**FETCH, "cache_control": {"type": "ephemeral"}}
    assert second["messages"][1]["content"] == expected("code_execution_tool_use")
    result = second["messages"][2]["content"][0]
    assert result["tool_use_id"] == "toolu_tx_0004" and '"available": 3' in result["content"]
    # the paused turn goes back as the last message, as it came, for the provider to go on
    assert third["messages"][-1] == {
        "role": "assistant",
        "content": expected("pause_turn_web_fetch"),
    }
    replies = of_type(events, "ModelResponded")
    assert [r["stop_reason"] for r in replies] == ["tool_use", "pause_turn", "end_turn"]
    assert replies[2]["usage"]["server_tool_use"] == {"web_search_requests": 1}
    assert replies[2]["content"][3]["citations"][0]["url"] == "https://example.org/tides/48"
    tail = cli("tail", "--run", summary["run_id"]).stdout
    assert "provider ran code_execution" in tail and "provider ran web_fetch" in tail


@pytest.fixture
def workers(cli: Cli, inventory: Path) -> Iterator[Callable[[], subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        procs.append(start_workers(cli, tools=["inventory_tools"], tool_path=inventory))
        return procs[-1]

    yield start
    stop_workers(procs)


def wait_for(
    cli: Cli, run_id: str, event_type: str, timeout_s: float = 120
) -> list[dict[str, Any]]:
    return cli.wait_events(run_id, lambda events: event_type in types(events), timeout_s)


def test_after_a_refusal_and_a_reply_the_refused_turn_is_not_sent_again(
    cli: Cli, inventory: Path, workers: Callable[[], Any]
) -> None:
    with MessagesStandin() as api:
        on_standin(cli, api)
        api.play(Transcript.named("refusal_stop_details"), Streamed((Text("A1: 3 available."),)))
        workers()
        done = cli("submit", "--as", cli.publisher(), spec(inventory))
        assert done.returncode == 0, done.stderr
        run_id = done.stdout.strip()
        wait_for(cli, run_id, "RunEscalated")
        shown = json.loads(cli("status", run_id, "--json").stdout)
        assert "category 'cyber': This request was refused due to policy." in shown["detail"]
        assert (
            cli("reply", "--as", cli.publisher(), run_id, "Only count the public stock.").returncode
            == 0
        )
        events = wait_for(cli, run_id, "RunCompleted")
        first, second = api.bodies()
    refused = of_type(events, "ModelResponded")[0]
    assert refused["stop_details"]["category"] == "cyber"  # kept in the log
    sent = json.dumps(second["messages"])
    assert "I can't help with getting into" not in sent and "signature" not in sent
    assert second["messages"][-1]["content"][-1]["text"].endswith("Only count the public stock.")
    assert len(second["messages"]) == 1  # the task and the person's word: the refused turn is gone
    context = json.loads(cli("context", run_id, "--turn", "2", "--json").stdout)
    assert context["verified"] and [d["action"] for d in context["decisions"]] == ["withdrawn"]


def test_a_refused_request_goes_to_the_fallback_model_without_the_refused_turn(
    cli: Cli, inventory: Path
) -> None:
    with MessagesStandin() as api:
        on_standin(cli, api)
        api.play(Transcript.named("refusal_stop_details"), Streamed((Text("A1: 3 available."),)))
        code, summary = cli.run_json(spec(inventory, fallback_model="claude-opus-5-5"))
        first, second = api.bodies()
    assert (code, summary["status"]) == (0, "completed"), summary
    assert (first["model"], second["model"]) == ("claude-sonnet-5-5", "claude-opus-5-5")
    assert second["messages"] == first["messages"]  # the same request, on the other model
    requested = of_type(cli.events(summary["run_id"]), "ModelRequested")
    assert [r["model"] for r in requested] == ["claude-sonnet-5-5", "claude-opus-5-5"]


TURNS = 60


def sixty_turns() -> list[Reply]:
    calls = [
        Streamed((Text(f"Checking again ({i})."), ToolUse(f"toolu_c{i:02d}", "lookup_stock", {"sku": "A1"})),
                 stop_reason="tool_use")
        for i in range(1, TURNS)
    ]  # fmt: skip
    return [*calls, Streamed((Text("A1: 3 available."),))]


def without_marks(body: dict[str, Any]) -> list[Any]:
    return [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in body["messages"]
    ]


def run_sixty(
    cli: Cli, inventory: Path, caching: str
) -> tuple[list[dict[str, Any]], list[Any], float]:
    with MessagesStandin(cache=True) as api:
        on_standin(cli, api)
        api.play(*sixty_turns())
        code, summary = cli.run_json(spec(inventory, prompt_cache=caching))
        bodies = api.bodies()
    assert (code, summary["status"], summary["turns"]) == (0, "completed", TURNS), summary
    usages = [Usage(**r["usage"]) for r in of_type(cli.events(summary["run_id"]), "ModelResponded")]
    price = price_of("claude-sonnet-5-5", {})
    return bodies, usages, sum(cost_usd(u, price) for u in usages)


def test_a_60_turn_run_is_cached_on_a_stable_prefix_and_costs_less(
    cli: Cli, inventory: Path
) -> None:
    bodies, usages, cached_cost = run_sixty(cli, inventory, "breakpoints")
    marks = [json.dumps(b).count('"cache_control"') for b in bodies]
    assert marks[0] >= 3 and all(
        m == 4 for m in marks[1:]
    )  # tools, system, two in the conversation
    stable = sum(
        without_marks(after)[: len(before["messages"])] == without_marks(before)
        for before, after in zip(bodies, bodies[1:], strict=False)
    )
    assert stable >= 55
    assert sum(u.cache_read_input_tokens > 0 for u in usages) >= 55
    _, plain_usages, plain_cost = run_sixty(cli, inventory, "off")
    assert all(u.cache_read_input_tokens == 0 for u in plain_usages)
    assert cached_cost < plain_cost * 0.5
    print(f"\n60 turns on the stand-in's cache: ${cached_cost:.4f} cached vs ${plain_cost:.4f} not")
