"""What `make bench` runs: the sizes of each workload (full and `--quick`) and
the scripted agent every system runs — one call of a no-op tool per turn,
then a final answer, no acceptance checks."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from agentledger.schemas.inbox import RunRequested
from agentledger.schemas.spec import (
    Budgets,
    Principal,
    RunSpec,
    ScriptedCall,
    ScriptedModel,
    ScriptedTurn,
)
from agentledger.services.adapters.tools.toolset import fingerprint_of
from agentledger.services.clock import new_run_id

TOOLS_MODULE = "bench_tools"  # registers bench_noop and bench_sleep
TOOLS_DIR = str(Path(__file__).resolve().parent)  # where it is
QUEUE = "bench"
WINDOW = 20  # calls at each end of the long run compared for growth


@dataclass(frozen=True)
class Plan:
    reps: int
    calls: int  # W1: tool calls in the one long run
    runs: int  # W2: one-call runs, one after the other
    concurrent: tuple[int, int]  # W3: runs at once x calls each
    log_sizes: tuple[int, ...]  # W5: events in the logs loaded
    kill_reps: int  # W5: SIGKILLed workers
    kill_cases: tuple[str, ...]  # what the killed worker holds: "tool", "model"
    floor_ops: int  # F: round trips timed per floor measure
    hops: int  # F: messages in each dramatiq chain
    peer_calls: int
    peer_runs: int
    peer_reps: int
    always_reps: int  # W1 again at AOF always
    parked: int  # R: runs waiting for an approval while a worker idles
    parked_reps: int
    parked_window_s: float  # R: each idle window counted
    retained_runs: int = 10_000  # T: finished runs written, then archived by one pass
    admission_runs: int = 1000  # A: requests published to one intake process (burst, paced)
    snapshot_rounds: int = 60  # S: write calls timed per repetition (bench.snapshots)


PLANS = {
    "default": Plan(
        reps=3, calls=200, runs=200, concurrent=(64, 10),
        log_sizes=(100, 1_000, 10_000, 100_000), kill_reps=3, kill_cases=("tool", "model"),
        floor_ops=2000, hops=100, peer_calls=200, peer_runs=200, peer_reps=3,
        always_reps=3, parked=1_000, parked_reps=1,
        parked_window_s=10.0,
    ),
    "quick": Plan(
        reps=3, calls=40, runs=40, concurrent=(16, 5),
        log_sizes=(100, 1_000, 10_000), kill_reps=1, kill_cases=("model",),
        floor_ops=300, hops=30, peer_calls=40, peer_runs=40, peer_reps=1,
        always_reps=1, parked=200, parked_reps=1,
        parked_window_s=5.0, retained_runs=1_000,
    ),
}  # fmt: skip


def noop_turn(i: int) -> ScriptedTurn:
    return ScriptedTurn(tool_use=(ScriptedCall(id=f"c{i}", name="bench_noop", input={"n": i}),))


def spec_of(turns: list[ScriptedTurn], task: str) -> RunSpec:
    return RunSpec(
        task=task,
        tools=(TOOLS_MODULE,),
        tool_path=(TOOLS_DIR,),
        principal=Principal(id="bench", tenant="bench"),
        budgets=Budgets(max_turns=len(turns) + 1),
        model=ScriptedModel(scripted=(*turns, ScriptedTurn(end_turn="done"))),
    )


def bench_spec(calls: int) -> RunSpec:
    """The scripted agent: `calls` turns of one no-op call each, then end_turn."""
    return spec_of([noop_turn(i) for i in range(1, calls + 1)], f"call bench_noop {calls} times")


def kill_spec(*, sleep_at: int, calls: int) -> RunSpec:
    """No-op calls, but call `sleep_at` sleeps a second: a worker can be killed holding it."""
    turns = [noop_turn(i) for i in range(1, calls + 1)]
    sleep = ScriptedCall(id=f"c{sleep_at}", name="bench_sleep", input={"seconds": 1.0})
    turns[sleep_at - 1] = ScriptedTurn(tool_use=(sleep,))
    return spec_of(turns, "a run whose worker is killed")


PARALLEL_READS = 4
READ_S = 0.25


def parallel_spec(*, at_once: int) -> RunSpec:
    """One turn of PARALLEL_READS independent reads (sleeps), `at_once` allowed to run together."""
    calls = tuple(
        ScriptedCall(id=f"p{i}", name="bench_sleep", input={"seconds": READ_S})
        for i in range(1, PARALLEL_READS + 1)
    )
    spec = spec_of([ScriptedTurn(tool_use=calls)], f"{PARALLEL_READS} reads, {at_once} at once")
    return spec.model_copy(update={"budgets": Budgets(max_turns=2, max_parallel_calls=at_once)})


def request_for(spec: RunSpec, shards: int = 16) -> RunRequested:
    run_id = new_run_id(uuid.uuid4().int % shards)
    toolset = fingerprint_of([TOOLS_MODULE], [TOOLS_DIR])
    return RunRequested(run_id=run_id, request_id=run_id, spec=spec, queue=QUEUE, toolset=toolset)
