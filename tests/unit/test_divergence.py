"""The divergence of a re-run: ids, times, attempts and claims do not count; a
different tool input, outcome or ending does, at the first place it happens."""

from __future__ import annotations

from typing import Any

from agentledger.events.divergence import first_divergence
from agentledger.events.types import (
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunCompleted,
    ToolCallFailed,
    ToolCallProposed,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolError,
)
from agentledger.schemas.content import ToolUseBlock
from agentledger.schemas.envelope import Envelope


def log(*events: Any, at: float = 1.0, run_id: str = "r-a") -> list[Envelope[Any]]:
    return [
        Envelope(
            id=f"{run_id}-{i}", run_id=run_id, seq=i, type=e.type, at=at + i, source="x", data=e
        )
        for i, e in enumerate(events, start=1)
    ]


USE = ToolUseBlock(id="c1", name="reserve", input={"sku": "A1", "qty": 2})


def recorded(
    *, attempt: int = 1, worker: str = "w1", outcome: Any = None, qty: int = 2
) -> list[Any]:
    return [
        ModelRequested(turn=1, attempt=attempt, deadline_at=9.0),
        ModelResponded(turn=1, content=(USE,), stop_reason="tool_use", model="m"),
        ToolCallProposed(call_id="c1", turn=1, name="reserve", input={"sku": "A1", "qty": qty}),
        ToolCallStarted(call_id="c1", attempt=attempt, worker=worker, deadline_at=5.0),
        outcome or ToolCallSucceeded(call_id="c1", output={"left": 1}, started_at=1, finished_at=2),
        RunCompleted(detail="ok"),
    ]


def test_runs_that_differ_only_in_ids_times_attempts_and_outputs_do_not_diverge() -> None:
    other = recorded(attempt=2, worker="w9")
    other[4] = ToolCallSucceeded(call_id="c1", output={"left": 7}, started_at=5, finished_at=9)
    assert first_divergence(log(*recorded()), log(*other, at=100.0, run_id="r-b")) is None


def test_model_requests_that_failed_before_the_reply_do_not_diverge() -> None:
    failed = ModelRequestFailed(
        turn=1, attempt=1, kind="overloaded", cause="overloaded (529 overloaded_error): Overloaded",
        status=529, retry_at=4.0,
    )  # fmt: skip
    retried = [ModelRequested(turn=1, attempt=1, deadline_at=9.0), failed, *recorded(attempt=2)]
    assert first_divergence(log(*retried), log(*recorded(), run_id="r-b")) is None


def test_a_different_outcome_is_reported_at_its_event() -> None:
    failed = ToolCallFailed(
        call_id="c1",
        error=ToolError(code="conflict", message="gone", retryable=False),
        finished_at=3,
    )
    d = first_divergence(log(*recorded()), log(*recorded(outcome=failed), run_id="r-b"))
    assert d is not None and (d.recorded_seq, d.rerun_seq) == (5, 5)
    assert d.recorded is not None and d.recorded.startswith("ToolCallSucceeded")
    assert d.rerun is not None and '"error": "conflict"' in d.rerun


def test_a_different_tool_input_and_a_shorter_rerun_are_divergences() -> None:
    d = first_divergence(log(*recorded()), log(*recorded(qty=3)))
    assert d is not None and d.recorded_seq == 3 and '"qty": 3' in (d.rerun or "")
    d = first_divergence(log(*recorded()), log(*recorded()[:-1]))
    assert d is not None and d.recorded_seq == 6 and d.rerun_seq is None and d.rerun is None


def test_calls_that_ran_together_may_end_in_either_order_but_a_different_outcome_diverges() -> None:
    def parallel(*order: str, failed: str | None = None) -> list[Any]:
        ended = {
            c: ToolCallFailed(
                call_id=c,
                error=ToolError(code="internal", message="x", retryable=False),
                started_at=1,
                finished_at=2,
            )
            if c == failed
            else ToolCallSucceeded(call_id=c, output={}, started_at=1, finished_at=2)
            for c in ("p1", "p2")
        }
        proposed = [
            ToolCallProposed(call_id=c, turn=1, name="read", input={"c": c}) for c in ("p1", "p2")
        ]
        return [*proposed, *(ended[c] for c in order), RunCompleted(detail="ok")]

    assert first_divergence(log(*parallel("p2", "p1")), log(*parallel("p1", "p2"))) is None
    diverged = first_divergence(log(*parallel("p2", "p1")), log(*parallel("p1", "p2", failed="p2")))
    assert diverged is not None and diverged.position == 2
