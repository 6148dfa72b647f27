"""A write's result that comes after its claim was declared unknown resolves the
unknown and moves the run on (out of awaiting_human when that was the only
reason); lease expiries and sweeps of an ended run record nothing; operation
keys are scoped to the run unless the tool names a business key; an acceptance
claim lasts as long as its checks may take."""

from __future__ import annotations

from runlog import Log, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events.acceptance_step import FILE_CHECK_S, claim_s
from agentledger.events.idempotency import operation_key
from agentledger.events.lock_step import record_lease_expired, record_lock, request_id
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import Errored, Succeeded, TimedOut
from agentledger.events.types import RunResumed, ToolCallSucceeded, ToolError
from agentledger.schemas.spec import RunSpec

R, C = RunStatus, CallStatus


def _unknown_write() -> Log:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"))
    do_validate(log, "w")
    do_claim(log, "w")
    deadline = log.call("w").claim_deadline
    log.decide(on_tick, now=deadline)  # its worker went silent: nobody can tell
    assert log.s.status is R.AWAITING_HUMAN and log.s.escalated_for == "outcome_unknown"
    return log


def test_a_late_result_resolves_the_unknown_and_the_run_goes_on_by_itself() -> None:
    log = _unknown_write()
    events = do_finish(log, "w", Succeeded(output="written"))
    succeeded = next(e for e in events if isinstance(e, ToolCallSucceeded))
    assert succeeded.resolved_by == "late_outcome"
    assert any(isinstance(e, RunResumed) and e.by == "agentledger" for e in events)
    assert log.s.status is R.REQUESTING_MODEL
    assert log.call("w").status is C.SUCCEEDED and log.call("w").output == "written"


def test_a_late_failure_is_recorded_and_the_run_goes_on() -> None:
    log = _unknown_write()
    error = ToolError(code="conflict", message="no such order", retryable=False)
    do_finish(log, "w", Errored(error))
    assert log.s.status is R.REQUESTING_MODEL and log.call("w").status is C.FAILED


def test_a_run_with_another_unknown_write_keeps_waiting_after_one_late_result() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="y"), use("v", "write_file", path="z"))
    for call_id in ("w", "v"):
        do_validate(log, call_id)
    for call_id in ("w", "v"):
        do_claim(log, call_id)
    do_finish(log, "w", TimedOut(after_s=1.0))
    do_finish(log, "v", TimedOut(after_s=1.0))
    assert log.s.status is R.AWAITING_HUMAN
    do_finish(log, "w", Succeeded(output="written"))
    assert log.call("w").status is C.SUCCEEDED
    assert log.s.status is R.AWAITING_HUMAN  # v's outcome is still unknown


def test_a_lease_expiry_on_a_run_that_ended_records_nothing() -> None:
    log = Log.created(budgets={"max_wall_clock_s": 10})
    do_model_turn(log, use("w", "write_file", path="x"))
    do_validate(log, "w", writes=["file:x"])
    request = request_id(log.s, log.call("w"))
    log.decide(record_lock, "w", request=request, tokens={"file:x": 1}, lease_until=log.now + 5)
    log.decide(on_tick, now=log.s.created_at + 11)
    assert log.s.status is R.TIMEOUT
    assert record_lease_expired(log.s, "w", request=request) == []
    assert on_tick(log.s, now=log.s.created_at + 100) == []


def test_without_key_fields_the_same_write_in_two_runs_is_two_operations() -> None:
    args = {"sku": "A1", "qty": 2}
    one = operation_key("shop-1", "reserve_stock", args, None, ["stock:A1"], run_id="r-1")
    again = operation_key("shop-1", "reserve_stock", args, None, ["stock:A1"], run_id="r-1")
    other = operation_key("shop-1", "reserve_stock", args, None, ["stock:A1"], run_id="r-2")
    assert one == again and one != other


def test_with_key_fields_the_key_spans_runs() -> None:
    a = {"order": "o-9", "qty": 2}
    one = operation_key("shop-1", "ship", a, ["order"], ["order:o-9"], run_id="r-1")
    other = operation_key("shop-1", "ship", {**a, "qty": 3}, ["order"], ["order:o-9"], run_id="r-2")
    assert one == other
    assert operation_key("shop-2", "ship", a, ["order"], ["order:o-9"], run_id="r-1") != one


def test_an_operation_key_holds_no_argument_value() -> None:
    key = operation_key("t", "pay", {"card": "4111-secret"}, None, (), run_id="r")
    assert "4111" not in key and "secret" not in key


def _spec(acceptance: list[dict[str, object]]) -> RunSpec:
    return RunSpec.model_validate(
        {
            "task": "t",
            "principal": {"id": "a", "tenant": "t"},
            "model": {"scripted": [{"end_turn": "x"}]},
            "acceptance": acceptance,
        }
    )


def test_an_acceptance_claim_with_no_checks_lasts_only_the_grace() -> None:
    assert claim_s(_spec([]), grace_s=2.0) == 2.0


def test_an_acceptance_claim_lasts_as_long_as_its_checks_may_take() -> None:
    checks = [{"command": "pytest", "timeout_s": 90}, {"file": "a", "contains": "b"}]
    assert claim_s(_spec(checks), grace_s=2.0) == 92.0 + FILE_CHECK_S
