"""The histograms and gauges an SRE reads, derived from the events' own times:
tool call runs by tool and outcome, model calls and their tokens by model, lock
waits, queue waits (published → taken), run lives by terminal state, busy
threads per pool, cost by tenant — parsed back with prometheus_client, in one
process and in multiprocess mode (the files `workers --processes N` adds up)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from journeys import happy_path, locks_waited_granted_and_lost, mcp_server_sampled_and_asked
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from runlog import T0, Log, do_request, use

from agentledger.events.batch import Appended
from agentledger.events.fold import apply
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.model_step import record_model_reply
from agentledger.events.types import ModelResponded
from agentledger.schemas.content import Usage
from agentledger.services.adapters.metrics.instruments import Instruments

REPO = Path(__file__).resolve().parents[2]


def fed(log: Log, ins: Instruments | None = None) -> Instruments:
    """Every event of the log counted as its own append, as the repository reports them."""
    ins = ins or Instruments()
    s = None
    for env in log.envelopes:
        after = apply(s, env)
        ins.observe_step(Appended(s, after, [env], [after.status]))
        s = after
    ins.flush()
    return ins


def samples(ins: Instruments | CollectorRegistry) -> dict[tuple[str, frozenset[Any]], float]:
    registry = ins.registry if isinstance(ins, Instruments) else ins
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def one(found: dict[tuple[str, frozenset[Any]], float], name: str, **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


def test_a_tool_call_is_timed_from_its_claim_to_its_outcome_by_tool_and_outcome() -> None:
    found = samples(fed(happy_path()))  # each call finishes a second after its claim
    for tool in ("read_file", "write_file"):
        assert (
            one(found, "agentledger_tool_call_seconds_count", tool=tool, outcome="succeeded") == 1
        )
        assert (
            one(found, "agentledger_tool_call_seconds_sum", tool=tool, outcome="succeeded") == 1.0
        )
    assert one(found, "agentledger_run_seconds_count", status="completed") == 1


def test_a_model_call_is_timed_from_its_claim_and_its_tokens_counted_by_kind() -> None:
    log = Log.created()
    claimed = do_request(log, now=T0 + 10)
    log.now = T0 + 12.5  # the reply came 2.5 s after the claim
    usage = Usage(input_tokens=12, output_tokens=40, cache_read_input_tokens=2755)
    log.decide(
        record_model_reply, turn=claimed.turn, attempt=claimed.attempt,
        content=(use("a", "read_file", path="x"),), stop_reason="tool_use", usage=usage,
        model="claude-x",
    )  # fmt: skip
    found = samples(fed(log))
    assert one(found, "agentledger_model_call_seconds_sum", model="claude-x", outcome="ok") == 2.5
    tokens = {
        kind: one(found, "agentledger_model_call_tokens_sum", model="claude-x", kind=kind)
        for kind in ("input", "output", "cache_read", "cache_write")
    }
    assert tokens == {"input": 12, "output": 40, "cache_read": 2755, "cache_write": 0}
    # 2755 tokens: above the 1024 bucket, within the 4096 one
    assert one(found, "agentledger_model_call_tokens_bucket", model="claude-x", kind="cache_read",
               le="1024.0") == 0  # fmt: skip
    assert one(found, "agentledger_model_call_tokens_bucket", model="claude-x", kind="cache_read",
               le="4096.0") == 1  # fmt: skip


def test_a_lock_wait_is_timed_from_queueing_to_the_grant_and_a_free_lock_waits_zero() -> None:
    found = samples(fed(locks_waited_granted_and_lost()))
    # the write queued behind the read, whose call finished a second later
    assert one(found, "agentledger_lock_wait_seconds_count", tool="write_file") == 2
    assert one(found, "agentledger_lock_wait_seconds_sum", tool="write_file") == 1.0
    assert one(found, "agentledger_lock_wait_seconds_bucket", tool="write_file", le="0.001") == 1


def test_cost_is_counted_by_tenant() -> None:
    log = Log.created(
        budgets={"max_turns": 3, "prices": {"scripted": {"input": 3.0, "output": 15.0}}}
    )
    do_request(log)
    log.decide(
        record_model_reply, turn=1, attempt=1, content=(use("a", "read_file", path="x"),),
        stop_reason="tool_use", usage=Usage(input_tokens=1000, output_tokens=1000), model="scripted",
    )  # fmt: skip
    found = samples(fed(log))
    assert one(found, "agentledger_tenant_cost_usd_total", tenant="acme") == 0.018
    assert one(found, "agentledger_model_cost_usd_total", model="scripted") == 0.018


def test_queue_wait_and_busy_threads_come_from_the_messages_a_pool_takes() -> None:
    ins = Instruments()
    ins.pool_threads({"tools": 8, "model": 2})
    timer = ins.step_timer()
    broker = SimpleNamespace(routes={"tools.q.fp": SimpleNamespace(pool="tools")})
    now_ms = int(time.time() * 1000)

    def message(published_ms: int, **options: Any) -> Any:
        return SimpleNamespace(options=dict(options), queue_name="tools.q.fp",
                               actor_name="drive_call", message_timestamp=published_ms)  # fmt: skip

    a, b = message(now_ms - 60_000), message(now_ms - 600_000, eta=now_ms - 60_000)
    timer.before_process_message(broker, a)
    timer.before_process_message(broker, b)  # delayed: it waited from when it was due
    ins.flush()
    found = samples(ins)
    assert one(found, "agentledger_pool_threads_busy", pool="tools") == 2
    assert one(found, "agentledger_pool_threads_busy", pool="model") == 0
    assert one(found, "agentledger_pool_threads", pool="tools") == 8
    assert one(found, "agentledger_queue_wait_seconds_count", pool="tools") == 2
    assert 120 <= one(found, "agentledger_queue_wait_seconds_sum", pool="tools") < 300
    timer.after_process_message(broker, a)
    timer.after_process_message(broker, b, exception=RuntimeError("x"))
    ins.flush()
    assert one(samples(ins), "agentledger_pool_threads_busy", pool="tools") == 0


MULTIPROCESS = """
import sys
sys.path[:0] = [{unit!r}]
from test_metrics_timings import fed
from journeys import happy_path, locks_waited_granted_and_lost, mcp_server_sampled_and_asked
ins = fed(happy_path())
ins.pool_threads({{"tools": 4}})
ins.busy("tools", 1)
fed(locks_waited_granted_and_lost(), ins)
"""


def test_every_new_family_adds_up_across_processes_in_multiprocess_mode(tmp_path: Path) -> None:
    from prometheus_client.multiprocess import MultiProcessCollector

    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": f"{REPO / '.pkg'}:{REPO}:{REPO / 'tests'}"}  # fmt: skip
    code = MULTIPROCESS.format(unit=str(REPO / "tests" / "unit"))
    for _ in range(2):  # two worker processes, each its own files
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))  # type: ignore[no-untyped-call]
    found = samples(registry)
    assert one(found, "agentledger_tool_call_seconds_count", tool="write_file",
               outcome="succeeded") == 4  # fmt: skip
    assert one(found, "agentledger_lock_wait_seconds_sum", tool="write_file") == 2.0
    assert one(found, "agentledger_run_seconds_count", status="completed") == 2
    assert one(found, "agentledger_model_call_tokens_count", model="scripted", kind="input") == 6
    # livesum: the live processes' gauges add up (a dead one's files are removed by the parent)
    assert one(found, "agentledger_pool_threads_busy", pool="tools") == 2
    assert one(found, "agentledger_pool_threads", pool="tools") == 8


def test_an_mcp_servers_sampling_counts_in_the_models_tokens() -> None:
    log = mcp_server_sampled_and_asked()
    sampled = [e.data for e in log.envelopes if isinstance(e.data, ToolSampledModel)]
    assert sampled  # the journey records the server's requests
    replies = [e.data for e in log.envelopes if isinstance(e.data, ModelResponded)]
    found = samples(fed(log))
    output = sum(d.usage.output_tokens for d in [*sampled, *replies] if d.model == "scripted")
    assert one(found, "agentledger_model_tokens_total", model="scripted", kind="output") == output
    assert output > sum(d.usage.output_tokens for d in replies if d.model == "scripted")
