"""The peers' side of the benchmark, run as `python -m tests.bench.peer_agents
NAME --calls N --runs M` in a process of its own: the same scripted agent as
ours (one call of a no-op tool per turn, then a final answer) built with each
framework's own pieces, timed in-process. Prints one JSON object: the time of
each tool call in the long run (turn times are their differences) and the wall
time of M one-call runs. The frameworks come from the optional `bench` extra;
an ImportError here makes the parent skip the peer with its message."""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Runner = Callable[[int], list[float]]  # one run of n calls -> when each tool call ran


def langgraph(checkpointer: str, folder: Path) -> Runner:
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    if checkpointer == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver: Any = SqliteSaver(sqlite3.connect(folder / "lg.sqlite", check_same_thread=False))
    else:
        from langgraph.checkpoint.memory import InMemorySaver

        saver = InMemorySaver()
    marks: list[float] = []
    script = {"left": 0, "n": 0}

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        if script["left"] == 0:
            return {"messages": [AIMessage(content="done")]}
        script["left"] -= 1
        script["n"] += 1
        call = {"name": "noop", "args": {"n": script["n"]}, "id": f"c{script['n']}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        marks.append(time.perf_counter())
        return {
            "messages": [ToolMessage(content=json.dumps(call["args"]), tool_call_id=call["id"])]
        }

    def route(state: dict[str, Any]) -> str:
        return "tools" if state["messages"][-1].tool_calls else END  # type: ignore[union-attr]

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=saver)

    def run(n: int) -> list[float]:
        marks.clear()
        script["left"], script["n"] = n, 0
        config = {"configurable": {"thread_id": f"t{time.perf_counter_ns()}"}}
        app.invoke(
            {"messages": [("user", f"call noop {n} times")]},
            {**config, "recursion_limit": 2 * n + 10},  # type: ignore[arg-type]
        )
        return list(marks)

    return run


def pydantic_ai(folder: Path) -> Runner:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits

    marks: list[float] = []
    script = {"left": 0, "n": 0}

    def model(messages: list[Any], info: Any) -> ModelResponse:
        if script["left"] == 0:
            return ModelResponse(parts=[TextPart("done")])
        script["left"] -= 1
        script["n"] += 1
        part = ToolCallPart("noop", {"n": script["n"]}, tool_call_id=f"c{script['n']}")
        return ModelResponse(parts=[part])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def noop(n: int) -> dict[str, int]:
        """Return the number it was given."""
        marks.append(time.perf_counter())
        return {"n": n}

    def run(n: int) -> list[float]:
        marks.clear()
        script["left"], script["n"] = n, 0
        limits = UsageLimits(request_limit=None)
        agent.run_sync(f"call noop {n} times", usage_limits=limits)
        return list(marks)

    return run


def pydantic_ai_dbos(folder: Path) -> Runner:
    """Pydantic AI made durable by DBOS (its `DBOSDurability` capability) on SQLite:
    the run is a DBOS workflow, each model request a step, and the tool a step of
    its own (a function tool is not one by default) — the closest peer to ours in
    what it keeps: a crash resumes the run from its last recorded step."""
    from dbos import DBOS
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import UsageLimits

    marks: list[float] = []
    script = {"left": 0, "n": 0}

    def model(messages: list[Any], info: Any) -> ModelResponse:
        if script["left"] == 0:
            return ModelResponse(parts=[TextPart("done")])
        script["left"] -= 1
        script["n"] += 1
        part = ToolCallPart("noop", {"n": script["n"]}, tool_call_id=f"c{script['n']}")
        return ModelResponse(parts=[part])

    url = f"sqlite:///{folder / 'dbos.sqlite'}"
    DBOS(config={"name": "bench", "system_database_url": url})  # type: ignore[typeddict-item]
    agent = Agent(FunctionModel(model), name="bench", capabilities=[DBOSDurability()])

    @DBOS.step()
    def noop_step(n: int) -> dict[str, int]:
        marks.append(time.perf_counter())
        return {"n": n}

    @agent.tool_plain
    def noop(n: int) -> dict[str, int]:
        """Return the number it was given."""
        return noop_step(n)

    @DBOS.workflow()
    async def workflow(prompt: str) -> str:
        result = await agent.run(prompt, usage_limits=UsageLimits(request_limit=None))
        return str(result.output)

    DBOS.launch()

    def run(n: int) -> list[float]:
        marks.clear()
        script["left"], script["n"] = n, 0
        asyncio.run(workflow(f"call noop {n} times"))
        return list(marks)

    return run


def openai_agents(folder: Path) -> Runner:
    from agents import Agent, function_tool, set_tracing_disabled
    from agents import Runner as AgentsRunner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)  # nothing leaves the machine
    marks: list[float] = []
    script = {"left": 0, "n": 0}

    class FakeModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            if script["left"] == 0:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                out: Any = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                script["left"] -= 1
                script["n"] += 1
                out = ResponseFunctionToolCall(
                    type="function_call",
                    name="noop",
                    call_id=f"c{script['n']}",
                    arguments=json.dumps({"n": script["n"]}),
                )
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def noop(n: int) -> str:
        """Return the number it was given."""
        marks.append(time.perf_counter())
        return json.dumps({"n": n})

    agent = Agent(name="bench", instructions="call noop", model=FakeModel(), tools=[noop])

    def run(n: int) -> list[float]:
        marks.clear()
        script["left"], script["n"] = n, 0
        asyncio.run(AgentsRunner.run(agent, f"call noop {n} times", max_turns=n + 5))
        return list(marks)

    return run


PEERS: dict[str, Callable[[Path], Runner]] = {
    "langgraph-sqlite": lambda folder: langgraph("sqlite", folder),
    "langgraph-memory": lambda folder: langgraph("memory", folder),
    "pydantic-ai": pydantic_ai,
    "pydantic-ai-dbos": pydantic_ai_dbos,
    "openai-agents": openai_agents,
}


def measure(name: str, calls: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentledger-peer-") as tmp:
        run = PEERS[name](Path(tmp))
        run(2)  # warm: imports, first connections, lazily built schemas
        started = time.perf_counter()
        marks = run(calls)
        long_s = time.perf_counter() - started
        if len(marks) != calls:
            raise RuntimeError(f"{name}: {len(marks)} tool calls, not {calls}")
        turns = [b - a for a, b in zip([started, *marks], marks, strict=False)]
        started = time.perf_counter()
        for _ in range(runs):
            run(1)
        many_s = time.perf_counter() - started
    return {"long_s": long_s, "turn_s": turns, "many_s": many_s}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench.peer_agents")
    p.add_argument("name", choices=sorted(PEERS))
    p.add_argument("--calls", type=int, required=True)
    p.add_argument("--runs", type=int, required=True)
    args = p.parse_args(argv)
    try:
        result = measure(args.name, args.calls, args.runs)
    except ImportError as exc:
        print(json.dumps({"skipped": f"not installed ({exc.name or exc})"}))
        return 0
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
