"""Legal journeys: runs driven the way the workers drive them, through the
decision functions, each ending in a known status. The transition tests prove
that together they exercise every row of both tables; other tests reuse them
as ready-made runs."""

from __future__ import annotations

from collections.abc import Callable

from runlog import (
    LEASE_S,
    T0,
    Log,
    check,
    do_accept,
    do_claim,
    do_finish,
    do_model_turn,
    do_tools,
    do_validate,
    text,
    use,
)

from events.model_step import record_model_error, request_model
from events.status import LIVE, RunStatus
from events.tool_step import Errored, Succeeded, TimedOut, expire_claims
from events.types import Event, FieldError, RunBudgetExhausted, RunEscalated, RunFailed, ToolError

R = RunStatus


def happy_path() -> Log:
    log = Log.created()
    do_model_turn(log, use("a", "read_file", path="x"), use("b", "write_file", path="y"))
    do_validate(log, "a")  # b still proposed: the run keeps validating
    do_validate(log, "b")  # the turn's last decision: tools may run
    do_claim(log, "a")
    do_finish(log, "a", Succeeded(output="contents"))
    do_claim(log, "b")
    do_finish(log, "b", Succeeded(output="ok"))  # the turn's last result
    do_model_turn(log, text("done"))
    do_accept(log, check(True), check(True))
    return log


def rejections_and_failures() -> Log:
    log = Log.created()
    do_model_turn(log, use("x", "no_such_tool"), use("y"), use("z"))
    do_validate(log, "x")  # rejected while others wait
    do_validate(log, "y")
    bad = FieldError(loc="path", msg="Field required")
    do_validate(log, "z", field_errors=[bad])  # rejected last: y may run
    do_claim(log, "y")
    do_finish(log, "y", Errored(ToolError(code="not_found", message="no x", retryable=False)))
    do_model_turn(log, use("p", "no_such_tool"))
    do_validate(log, "p")  # every call rejected: straight back to the model
    do_model_turn(log, use("q"), use("r"))
    do_validate(log, "q")
    do_validate(log, "r")
    do_claim(log, "q")
    do_claim(log, "r")
    do_finish(log, "q", TimedOut(after_s=5.0))  # a read timing out fails while r runs
    do_finish(log, "r", Succeeded(output="fine"))
    return log


def acceptance_retried_then_failed() -> Log:
    log = Log.created(max_turns=2)
    do_model_turn(log, text("done"))
    do_accept(log, check(False))
    do_model_turn(log, text("done now"))
    do_accept(log, check(False))
    return log


def model_stopped_at_max_tokens() -> Log:
    log = Log.created()
    do_model_turn(log, text("and then"), stop="max_tokens")
    return log


def model_error() -> Log:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    log.decide(record_model_error, turn=1, attempt=1, message="invalid_request_error")
    return log


def duplicate_tool_use_ids() -> Log:
    log = Log.created()
    do_model_turn(log, use("a"), use("a"))
    return log


def turns_exhausted() -> Log:
    log = Log.created(max_turns=1)
    do_model_turn(log, use("a"))
    do_tools(log)
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    return log


def write_timed_out() -> Log:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"))
    do_validate(log, "w")
    do_claim(log, "w")
    do_finish(log, "w", TimedOut(after_s=10.0))
    return log


def read_claim_expired_three_times() -> Log:
    log = Log.created()
    do_model_turn(log, use("r"))
    do_validate(log, "r")
    now = T0
    for _ in range(3):
        do_claim(log, "r", now=now)
        deadline = log.s.call("r").claim_deadline  # type: ignore[union-attr]
        now = deadline
        log.decide(expire_claims, now=now)
    return log


def reach(status: RunStatus) -> Log:
    """A run brought to a live status through the decisions."""
    log = Log.created()
    if status is R.VALIDATING or status is R.RUNNING_TOOLS:
        do_model_turn(log, use("a"))
    if status is R.RUNNING_TOOLS:
        do_validate(log, "a")
    if status is R.ACCEPTING:
        do_model_turn(log, text("done"))
    assert log.s.status is status
    return log


ENDINGS: dict[str, Event] = {
    "RunFailed": RunFailed(reason="cancelled", detail="an operator stopped it"),
    "RunBudgetExhausted": RunBudgetExhausted(budget="turns", used=1, limit=1, detail="out"),
    "RunEscalated": RunEscalated(reason="operator", detail="a human asked to look"),
}


def ended_from(status: RunStatus, ending: str) -> Callable[[], Log]:
    # No decision in events/ ends a run from every live state (the services and
    # operators do), so these journeys append the ending themselves.
    def journey() -> Log:
        log = reach(status)
        log.append(ENDINGS[ending])
        return log

    return journey


JOURNEYS: dict[str, tuple[Callable[[], Log], RunStatus]] = {
    "happy_path": (happy_path, R.COMPLETED),
    "rejections_and_failures": (rejections_and_failures, R.REQUESTING_MODEL),
    "acceptance_retried_then_failed": (acceptance_retried_then_failed, R.FAILED),
    "model_stopped_at_max_tokens": (model_stopped_at_max_tokens, R.FAILED),
    "model_error": (model_error, R.FAILED),
    "duplicate_tool_use_ids": (duplicate_tool_use_ids, R.FAILED),
    "turns_exhausted": (turns_exhausted, R.BUDGET_EXHAUSTED),
    "write_timed_out": (write_timed_out, R.AWAITING_HUMAN),
    "read_claim_expired_three_times": (read_claim_expired_three_times, R.REQUESTING_MODEL),
    **{
        f"{ending}_from_{live}": (ended_from(live, ending), to)
        for live in sorted(LIVE)
        for ending, to in (
            ("RunFailed", R.FAILED),
            ("RunBudgetExhausted", R.BUDGET_EXHAUSTED),
            ("RunEscalated", R.AWAITING_HUMAN),
        )
    },
}
