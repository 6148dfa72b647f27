"""`agentledger trace` on a finished inventory run: the spans its log implies."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2ekit import Cli, copy_example


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory, make_cli: Callable[[Path], Cli]
) -> tuple[Cli, str, list[dict[str, Any]]]:
    cli = make_cli(tmp_path_factory.mktemp("trace"))
    example = copy_example("inventory", cli.cwd)
    code, summary = cli.run_json(example / "spec.yaml")
    assert code == 0, summary
    return cli, summary["run_id"], cli.events(summary["run_id"])


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def test_the_inventory_trace_is_one_invoke_agent_span_with_chat_and_execute_tool_children_in_log_order(
    traced: tuple[Cli, str, list[dict[str, Any]]],
) -> None:
    cli, run_id, events = traced
    done = cli("trace", run_id, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    roots = [s for s in spans if "parentSpanId" not in s]
    assert [r["name"] for r in roots] == ["invoke_agent agentledger"]
    root = roots[0]
    assert _attrs(root)["gen_ai.agent.id"] == run_id
    assert _attrs(root)["agentledger.run.status"] == "completed"
    assert root["status"] == {"code": 1}
    children = [s for s in spans if s.get("parentSpanId") == root["spanId"]]
    assert len(children) == len(spans) - 1  # every other span is a child of the run's
    # one chat per ModelRequested, one execute_tool per ToolCallProposed, in the log's order
    expected = [
        ("chat scripted" if e["type"] == "ModelRequested" else f"execute_tool {e['data']['name']}")
        for e in events if e["type"] in ("ModelRequested", "ToolCallProposed")
    ]  # fmt: skip
    assert [c["name"] for c in children] == expected
    assert expected[:3] == ["chat scripted", "execute_tool lookup_stock", "chat scripted"]
    starts = [int(c["startTimeUnixNano"]) for c in children]
    assert starts == sorted(starts)
    tools = [_attrs(c) for c in children if c["name"].startswith("execute_tool")]
    assert [t["gen_ai.tool.call.id"] for t in tools] == ["c17", "c18"]
    assert all(t["gen_ai.operation.name"] == "execute_tool" for t in tools)
    chats = [_attrs(c) for c in children if c["name"].startswith("chat")]
    assert all(int(c["gen_ai.usage.output_tokens"]) > 0 for c in chats)
    assert {s["traceId"] for s in spans} == {root["traceId"]}


def test_the_text_trace_is_a_tree_of_the_same_spans(
    traced: tuple[Cli, str, list[dict[str, Any]]],
) -> None:
    cli, run_id, _ = traced
    done = cli("trace", run_id)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("trace ") and run_id in lines[0]
    assert lines[1].startswith("invoke_agent agentledger") and lines[1].endswith("ok")
    assert [ln.split()[0] for ln in lines[2:]] == [
        "chat", "execute_tool", "chat", "execute_tool", "chat",
    ]  # fmt: skip
    assert all(ln.startswith("  ") for ln in lines[2:])


def test_trace_of_an_unknown_run_says_so(traced: tuple[Cli, str, list[dict[str, Any]]]) -> None:
    cli, _, _ = traced
    done = cli("trace", "r-nope", "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"] == "no run"
    assert "Traceback" not in done.stderr


def test_trace_json_names_the_service_as_the_exporter_does(
    traced: tuple[Cli, str, list[dict[str, Any]]],
) -> None:
    cli, run_id, _ = traced

    def service(**env: str) -> str:
        named = dataclasses.replace(cli, env={**cli.env, **env})
        done = named("trace", run_id, "--json")
        assert done.returncode == 0, done.stderr
        resource = json.loads(done.stdout)["resourceSpans"][0]["resource"]
        return str(_attrs(resource)["service.name"])

    assert service() == "agentledger"
    assert service(OTEL_SERVICE_NAME="checkout-agents") == "checkout-agents"
    assert service(OTEL_RESOURCE_ATTRIBUTES="team=a,service.name=shop%20agents") == "shop agents"
