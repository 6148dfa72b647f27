"""Repeat detection: each finished tool step has a fingerprint (tool, canonical
arguments, outcome code). K identical failing steps in a row (K =
budgets.repeat_limit) send the run to a human in the same batch as the K-th
result, with a record like "8 turns, 3 identical `not_found` for
read_file(path='x')"; each result still goes back to the model. A success or
a different failure breaks the streak; a person's reply or resume starts
counting afresh."""

from __future__ import annotations

import json

from journeys import NOT_FOUND
from runlog import (
    Log,
    do_claim,
    do_finish,
    do_model_turn,
    do_request,
    do_tools,
    do_validate,
    use,
)

from agentledger.events import controls
from agentledger.events.conversation import messages
from agentledger.events.repeat import failing_streak, fingerprint
from agentledger.events.status import RunStatus
from agentledger.events.tool_step import Errored, Outcome, Succeeded
from agentledger.events.types import Event, RunEscalated, ToolCallFailed, ToolError
from agentledger.schemas.content import ToolResultBlock

R = RunStatus
DENIED = ToolError(code="permission_denied", message="no", retryable=False)


def step(log: Log, call_id: str, outcome: Outcome | None = None, **args: object) -> list[Event]:
    """One turn of one read_file call that ends with `outcome` (not_found by default)."""
    do_model_turn(log, use(call_id, **(args or {"path": "x"})))  # type: ignore[arg-type]
    do_validate(log, call_id)
    do_claim(log, call_id)
    return do_finish(log, call_id, outcome or Errored(NOT_FOUND))


def test_the_exercise_a_path_that_does_not_exist_leaves_the_loop_at_the_threshold() -> None:
    log = Log.created(max_turns=10)
    for i in range(5):
        step(log, f"ok{i}", Succeeded(output="contents"), path=f"f{i}")
    assert step(log, "x1") == [
        ToolCallFailed(call_id="x1", error=NOT_FOUND, started_at=log.now - 1, finished_at=log.now)
    ]
    step(log, "x2")
    events = step(log, "x3")
    assert events[-1] == RunEscalated(
        reason="repeated_failure", detail="8 turns, 3 identical `not_found` for read_file(path='x')"
    )
    assert [type(e) for e in events] == [ToolCallFailed, RunEscalated]  # one batch
    assert log.s.status is R.AWAITING_HUMAN
    assert log.s.detail == events[-1].detail
    results = [
        b
        for m in messages(log.s)
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.tool_use_id.startswith("x")
    ]
    assert [(r.tool_use_id, r.is_error) for r in results] == [
        ("x1", True),
        ("x2", True),
        ("x3", True),
    ]
    assert all(json.loads(r.content)["error"]["code"] == "not_found" for r in results)  # type: ignore[arg-type]


def test_fewer_identical_failures_than_the_limit_go_on() -> None:
    log = Log.created(max_turns=5)
    step(log, "x1")
    step(log, "x2")
    assert log.s.status is R.REQUESTING_MODEL
    assert failing_streak(log.s)[0] == 2


def test_the_limit_comes_from_the_spec() -> None:
    log = Log.created(max_turns=5, budgets={"repeat_limit": 2})
    step(log, "x1")
    assert isinstance(step(log, "x2")[-1], RunEscalated)


def test_a_success_breaks_the_streak() -> None:
    log = Log.created(max_turns=6)
    step(log, "x1")
    step(log, "x2")
    step(log, "ok", Succeeded(output="found it"))
    step(log, "x3")
    step(log, "x4")
    assert log.s.status is R.REQUESTING_MODEL


def test_a_different_failure_breaks_the_streak() -> None:
    log = Log.created(max_turns=6)
    step(log, "x1")
    step(log, "x2")
    step(log, "d", Errored(DENIED))  # same call, another outcome
    step(log, "y", path="y")  # same outcome, other arguments
    step(log, "x3")
    assert log.s.status is R.REQUESTING_MODEL
    assert failing_streak(log.s)[0] == 1


def test_arguments_are_compared_in_a_canonical_order() -> None:
    log = Log.created(max_turns=5)
    step(log, "x1", path="x", n=1)
    step(log, "x2", n=1, path="x")
    events = step(log, "x3", path="x", n=1)
    assert events[-1].detail == "3 turns, 3 identical `not_found` for read_file(n=1, path='x')"  # type: ignore[union-attr]


def test_identical_failing_calls_in_one_turn_count_as_steps() -> None:
    log = Log.created()
    do_model_turn(log, *(use(f"x{i}", path="x") for i in range(3)))
    for i in range(3):
        do_validate(log, f"x{i}")
    for i in range(3):
        do_claim(log, f"x{i}")
        events = do_finish(log, f"x{i}", Errored(NOT_FOUND))
    assert events[-1].detail == "1 turn, 3 identical `not_found` for read_file(path='x')"  # type: ignore[union-attr]


def test_a_reply_starts_counting_afresh() -> None:
    log = Log.created(max_turns=8)
    for i in range(3):
        step(log, f"x{i}")
    assert log.s.status is R.AWAITING_HUMAN
    log.decide(controls.reply, by="dana", escalation=log.s.escalation, text="the file is called y")
    assert failing_streak(log.s) == (0, None)
    step(log, "x3")
    step(log, "x4")
    assert log.s.status is R.REQUESTING_MODEL
    assert step(log, "x5")[-1].detail.endswith("3 identical `not_found` for read_file(path='x')")  # type: ignore[union-attr]


def test_a_resume_starts_counting_afresh() -> None:
    log = Log.created(max_turns=8)
    for i in range(3):
        step(log, f"x{i}")
    log.decide(controls.resume, by="dana", escalation=log.s.escalation)
    assert log.s.status is R.REQUESTING_MODEL
    do_request(log)  # the model is asked again: not escalated once more
    assert log.s.status is R.REQUESTING_MODEL


def test_only_finished_calls_have_a_fingerprint() -> None:
    log = Log.created()
    do_model_turn(log, use("a", path="x"), use("b", path="x"))
    do_validate(log, "a")
    assert fingerprint(log.call("a")) is None
    do_validate(log, "b")
    do_tools_for(log, "a", "b")
    fp = fingerprint(log.call("a"))
    assert fp is not None and not fp.failing and fp.outcome == "ok"
    assert fp == fingerprint(log.call("b"))


def do_tools_for(log: Log, *call_ids: str) -> None:
    for call_id in call_ids:
        do_claim(log, call_id)
        do_finish(log, call_id, Succeeded(output="same"))


def test_a_turn_of_successes_has_no_streak() -> None:
    log = Log.created()
    do_model_turn(log, use("a"))
    do_tools(log)
    assert failing_streak(log.s) == (0, None)
