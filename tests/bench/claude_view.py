"""`python -m tests.bench.claude_view`: two figures of the model step, printed
(a benchmark, not a test; the numbers move with the machine's load).

1. The context view and the budget check per model request, at turns 2-21 and
   181-200 of a run grown as the fold grows it (one tool call a turn, ~1 kB of
   result, a thinking block): what issue 11 asks to stay flat.
2. A 60-turn conversation through the anthropic adapter and the real SDK to the
   stand-in's simulated prompt cache, priced at claude-sonnet-5-5's list prices,
   with `prompt_cache: breakpoints` and `off`.
3. Its OpenAI-compatible twin: the same 60 requests through each adapter and its
   real SDK to its stand-in (the Messages API's, the Chat Completions API's as
   vLLM serves it), the median wall time of one model step side by side."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from agentledger.events.budgets import estimate_request
from agentledger.events.context_view import assemble
from agentledger.events.history import History
from agentledger.events.model_step import request_model
from agentledger.events.pricing import cost_usd, price_of
from agentledger.events.redact import Redactor
from agentledger.events.state import Call, RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.schemas.content import TextBlock, ThinkingBlock, ToolUseBlock, Usage
from agentledger.schemas.spec import (
    AnthropicSettings,
    Principal,
    RunSpec,
    ScriptedModel,
    ScriptedTurn,
    ToolSpec,
)
from agentledger.services.adapters.models.anthropic_adapter import AnthropicAdapter
from agentledger.services.adapters.models.port import ModelRequest
from tests.standin.messages_api import MessagesStandin, Streamed, Text, ToolUse

TOOLS = (
    ToolSpec(
        name="lookup_stock",
        description="Available quantity for a SKU.",
        input_schema={"type": "object", "properties": {"sku": {"type": "string"}}},
        read_only=True,
    ),
)
SPEC = RunSpec(
    task="Count every SKU's stock, one at a time.",
    system="Use the stock tools; never guess a quantity.",
    principal=Principal(id="alice", tenant="t1"),
    model=ScriptedModel(scripted=(ScriptedTurn(end_turn="done"),)),
    budgets={
        "max_turns": 1000,
        "max_cost_usd": 100.0,
        "prices": {"scripted": {"input": 1, "output": 1}},
    },
)


def turn(i: int) -> Turn:
    use = ToolUseBlock(id=f"toolu_{i:03d}", name="lookup_stock", input={"sku": f"A{i}"})
    call = Call(
        call_id=use.id, turn=i, name=use.name, input=use.input, status=CallStatus.SUCCEEDED,
        output={"sku": f"A{i}", "available": i, "history": [f"moved {k} on day {k}" for k in range(40)]},
    )  # fmt: skip
    said = (
        ThinkingBlock(thinking=f"Next: A{i}.", signature=f"sig-{i}"),
        TextBlock(text=f"A{i}?"),
        use,
    )
    return Turn(i, said, "tool_use", "m", (call,))


def grown(n: int) -> list[RunState]:
    base = RunState(
        run_id="r-bench",
        status=RunStatus.REQUESTING_MODEL,
        spec=SPEC,
        workspace=None,
        created_at=0.0,
    )
    states, history = [], History[Turn]()
    for i in range(1, n + 1):
        current = turn(i)
        states.append(replace(base, history=history, current_turn=current))
        history = history.append(current)
    return states


def view_cost() -> None:
    r, times = Redactor(), {}
    for s in grown(200):
        t0 = time.perf_counter()
        view = assemble(s, TOOLS, r)
        request_model(s, now=1.0, lease_s=10.0, estimate=estimate_request(s, view))
        times[s.turns_used] = time.perf_counter() - t0
    early = statistics.median(times[i] for i in range(2, 22))
    late = statistics.median(times[i] for i in range(181, 201))
    print(f"context view + budget check per request: turns 2-21 {early * 1e3:.3f} ms, "
          f"181-200 {late * 1e3:.3f} ms (x{late / early:.2f})")  # fmt: skip


def cached_cost(caching: str, turns: int = 60) -> tuple[float, int]:
    settings = AnthropicSettings(model="claude-sonnet-5-5", max_tokens=2048, prompt_cache=caching)
    price, total, reads = price_of(settings.model, {}), 0.0, 0
    with MessagesStandin(cache=True) as api:
        model = AnthropicAdapter(settings, api_key="sk-ant-bench-000000", base_url=api.url)
        for s in grown(turns):
            api.play(
                Streamed(
                    (Text("ok"), ToolUse(f"toolu_x{s.turns_used}", "lookup_stock", {})), "tool_use"
                )
            )
            view = assemble(s, TOOLS, Redactor())
            request = ModelRequest(
                s.run_id, s.turns_used + 1, view.system, view.messages, view.tools
            )
            usage: Usage = model.respond(request).usage
            total += cost_usd(usage, price)
            reads += usage.cache_read_input_tokens > 0
    return total, reads


def adapter_steps(turns: int = 60) -> dict[str, float]:
    """The median ms of one `respond` through each adapter and its SDK to its stand-in."""
    from agentledger.schemas.openai_spec import OpenAIModel
    from agentledger.services.adapters.models.openai_adapter import OpenAIAdapter
    from agentledger.services.settings import Settings
    from tests.standin.chat_completions import Call, Chat, ChatStandin

    states = grown(turns)
    medians: dict[str, float] = {}
    with MessagesStandin() as claude, ChatStandin() as chat:
        spec = OpenAIModel.model_validate({"openai": {"model": "gpt-5-mini", "base_url": chat.url}})
        adapters = {
            "anthropic": AnthropicAdapter(
                AnthropicSettings(model="claude-sonnet-5-5", max_tokens=2048),
                api_key="sk-ant-bench-000000", base_url=claude.url,
            ),
            "openai": OpenAIAdapter(spec, Settings(model_endpoints=(chat.url,))),
        }  # fmt: skip
        for name, model in adapters.items():
            times = []
            for s in states:
                n = s.turns_used
                claude.play(
                    Streamed((Text("ok"), ToolUse(f"toolu_x{n}", "lookup_stock", {})), "tool_use")
                )
                chat.play(Chat(content="ok", calls=(Call("lookup_stock", {}, id=f"call_x{n}"),)))
                view = assemble(s, TOOLS, Redactor())
                request = ModelRequest(s.run_id, n + 1, view.system, view.messages, view.tools)
                t0 = time.perf_counter()
                model.respond(request)
                times.append(time.perf_counter() - t0)
            medians[name] = statistics.median(times) * 1e3
    return medians


def main() -> None:
    view_cost()
    with_cache, reads = cached_cost("breakpoints")
    without, _ = cached_cost("off")
    print(f"60 requests on the stand-in's cache at claude-sonnet-5-5 prices: ${with_cache:.4f} with "
          f"breakpoints ({reads} of 60 read the cache), ${without:.4f} without (x{without / with_cache:.1f})")  # fmt: skip

    steps = adapter_steps()
    print(f"one model step through the adapter and its SDK to its stand-in, median of 60: "
          f"anthropic {steps['anthropic']:.2f} ms, openai-compatible {steps['openai']:.2f} ms "
          f"(x{steps['openai'] / steps['anthropic']:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
