"""The worker's metrics: counted from a step's states and events into local
tallies, handed to prometheus_client by `flush` — nothing lost across threads,
and a fault in counting never fails the step."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from prometheus_client import generate_latest

from agentledger.events.batch import Appended
from agentledger.services.adapters.metrics.instruments import Instruments


def text(ins: Instruments) -> str:
    ins.flush()
    return generate_latest(ins.registry).decode()


def test_counts_from_many_threads_all_arrive() -> None:
    ins = Instruments()

    def work() -> None:
        for _ in range(5000):
            ins.count(ins.tool_calls, ("t", "succeeded"))
            ins.rejected_inc()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    flusher = threading.Thread(target=lambda: [ins.flush() for _ in range(50)])
    flusher.start()
    for t in threads:
        t.join()
    flusher.join()
    out = text(ins)
    assert 'agentledger_tool_calls_total{outcome="succeeded",tool="t"} 40000.0' in out
    assert "agentledger_inbox_rejected_total 40000.0" in out


def test_nothing_reaches_prometheus_before_a_flush() -> None:
    ins = Instruments()
    ins.count(ins.terminal, ("completed",))
    assert "runs_ended_total{" not in generate_latest(ins.registry).decode()
    assert 'agentledger_runs_ended_total{status="completed"} 1.0' in text(ins)


def test_a_step_time_goes_to_its_pool_and_actor() -> None:
    ins = Instruments()
    timer = ins.step_timer()
    broker = SimpleNamespace(routes={"tools.q.fp": SimpleNamespace(pool="tools")})
    message: Any = SimpleNamespace(
        options={}, queue_name="tools.q.fp", actor_name="drive_call", message_timestamp=0
    )
    timer.before_process_message(broker, message)
    timer.after_process_message(broker, message, exception=RuntimeError("x"))
    assert "_al_t0" not in message.options  # never stored with a retry
    out = text(ins)
    assert (
        'agentledger_step_seconds_count{actor="drive_call",outcome="error",pool="tools"} 1.0' in out
    )


def test_a_fault_in_counting_never_fails_the_step(caplog: Any) -> None:
    ins = Instruments()
    broken: Any = SimpleNamespace(run_id="r-1", status=None)  # not a RunState
    ins.observe_step(Appended(None, broken, [], [None]))  # type: ignore[list-item]
    assert "could not count a step of run 'r-1'" in caplog.text
