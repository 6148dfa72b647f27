"""Live traces: `agentledger run` with the standard OTEL_EXPORTER_OTLP_ENDPOINT
set sends the run's spans over OTLP/HTTP as they end, to a stand-in receiver on
loopback; the model is the real anthropic SDK against the Messages API
stand-in, whose own request spans arrive as children of the `chat` spans."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from e2ekit import Cli, copy_example
from test_cli_anthropic import INVENTORY, KEY
from test_cli_claude import spec

from tests.standin.messages_api import MessagesStandin, Streamed, Text, ToolUse
from tests.standin.otlp_receiver import OtlpReceiver

SDK_SCOPE = "com.anthropic.sdk.python"


def test_a_live_run_exports_the_logs_spans_with_the_sdks_request_spans_as_children_of_chat(
    tmp_path: Path, make_cli: Callable[[Path], Cli]
) -> None:
    cli = make_cli(tmp_path)
    example = copy_example("inventory", cli.cwd)
    with MessagesStandin() as api, OtlpReceiver() as otlp:
        api.play(*INVENTORY)
        cli.env |= {
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": api.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        code, summary = cli.run_json(example / "spec_anthropic.yaml")
        assert code == 0, summary
        received = otlp.wait_for("invoke_agent agentledger")
    run_id = summary["run_id"]
    ours = [s for s in received if s.scope == "agentledger"]
    sdk = [s for s in received if s.scope == SDK_SCOPE]
    (root,) = [s for s in ours if s.parent_id is None]
    assert root.attributes["gen_ai.agent.id"] == run_id
    assert root.status_code == 1  # ok: the run completed
    children = sorted((s for s in ours if s.parent_id == root.span_id), key=lambda s: s.start_ns)
    assert [s.name.split()[0] for s in children] == [
        "chat", "execute_tool", "chat", "execute_tool", "chat",
    ]  # fmt: skip
    assert len(ours) == 6  # each span exported once
    # the SDK's span of each Messages API request is a child of the chat span it served
    chats = {s.span_id for s in children if s.name.startswith("chat")}
    assert len(sdk) == 3
    assert {s.parent_id for s in sdk} == chats
    assert {s.trace_id for s in received} == {root.trace_id}
    # what went out live is what `agentledger trace` derives from the log afterwards
    done = cli("trace", run_id, "--json")
    spans = json.loads(done.stdout)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert sorted((s["spanId"], s["name"]) for s in spans) == sorted(
        (s.span_id, s.name) for s in ours
    )


TURNS = 20


def test_a_20_turn_cached_runs_trace_counts_the_providers_tokens_once(
    tmp_path: Path, make_cli: Callable[[Path], Cli]
) -> None:
    """Each `chat` span's `gen_ai.usage.input_tokens` includes the prompt read from (and
    written to) the cache, with the cached parts beside it; the SDK's own request span is
    its child but no second model call (no `gen_ai.*` of its own); the run's span keeps
    its totals outside `gen_ai.usage.*`. So the trace's `gen_ai.usage.*` add up to what
    the provider (the stand-in's simulated cache) billed, once. The resource is named by
    OTEL_SERVICE_NAME."""
    cli = make_cli(tmp_path)
    inventory = copy_example("inventory", cli.cwd)
    replies = [
        Streamed((Text(f"Checking ({i})."), ToolUse(f"toolu_t{i:02d}", "lookup_stock", {"sku": "A1"})),
                 stop_reason="tool_use")
        for i in range(1, TURNS)
    ]  # fmt: skip
    with MessagesStandin(cache=True) as api, OtlpReceiver() as otlp:
        api.play(*replies, Streamed((Text("A1: 3 available."),)))
        cli.env |= {
            "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.url, "NO_PROXY": "127.0.0.1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_SERVICE_NAME": "agents-eu-1",
        }  # fmt: skip
        code, summary = cli.run_json(spec(inventory))
        received = otlp.wait_for("invoke_agent agentledger")
        billed = list(api.usages)
    assert (code, summary["turns"]) == (0, TURNS), summary
    assert len(billed) == TURNS and sum(u["cache_read_input_tokens"] > 0 for u in billed) >= 15
    chats = [s for s in received if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == TURNS and {s.scope for s in chats} == {"agentledger"}

    def traced(key: str) -> int:
        return sum(int(s.attributes.get(key, 0)) for s in received)

    prompt = sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in billed
    )
    assert traced("gen_ai.usage.input_tokens") == prompt
    assert traced("gen_ai.usage.cache_read.input_tokens") == sum(
        u["cache_read_input_tokens"] for u in billed
    )
    assert traced("gen_ai.usage.output_tokens") == sum(u["output_tokens"] for u in billed)
    sdk = [s for s in received if s.scope == SDK_SCOPE]
    assert len(sdk) == TURNS and {s.parent_id for s in sdk} == {s.span_id for s in chats}
    assert not any(k.startswith("gen_ai.") for s in sdk for k in s.attributes)
    assert (
        sum(int(s.attributes["agentledger.sdk.gen_ai.usage.input_tokens"]) for s in sdk) == prompt
    )
    (root,) = [s for s in received if s.parent_id is None]
    assert root.attributes["agentledger.usage.input_tokens"] == prompt
    assert {s.service for s in received} == {"agents-eu-1"}
