"""Given a run whose model ended its turn, when the acceptance worker decides,
then the run completes only on passing checks; failing checks go back to the
model while turns are left, and fail the run when none are. A pass whose check
began before a later write to what it depends on does not count."""

from __future__ import annotations

import pytest
from runlog import (
    LEASE_S,
    T0,
    Log,
    check,
    do_accept,
    do_cancel,
    do_finish,
    do_model_turn,
    do_validate,
    make_spec,
    text,
    use,
)

from agentledger.events.acceptance_step import contains, record_acceptance, start_acceptance
from agentledger.events.status import RunStatus
from agentledger.events.tool_step import Succeeded
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    RunCompleted,
    RunFailed,
    ToolCallStarted,
)

R = RunStatus


def accepting(*, max_turns: int = 3) -> Log:
    log = Log.created(max_turns=max_turns)
    do_model_turn(log, text("done"))
    assert log.s.status is R.ACCEPTING
    return log


def test_acceptance_is_claimed_until_a_deadline() -> None:
    log = accepting()
    events = log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    assert events == [AcceptanceStarted(attempt=1, deadline_at=T0 + LEASE_S)]
    assert start_acceptance(log.s, now=T0 + LEASE_S - 0.001, lease_s=LEASE_S) == []


def test_an_acceptance_claim_past_its_deadline_is_claimed_again() -> None:
    log = accepting()
    log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    events = start_acceptance(log.s, now=T0 + LEASE_S, lease_s=LEASE_S)
    assert events == [AcceptanceStarted(attempt=2, deadline_at=T0 + 2 * LEASE_S)]


def test_acceptance_is_not_started_before_the_model_ends_its_turn() -> None:
    assert start_acceptance(Log.created().s, now=T0, lease_s=LEASE_S) == []


def test_all_checks_passing_completes_the_run() -> None:
    log = accepting()
    events = do_accept(log, check(True), check(True))
    assert [type(e) for e in events] == [AcceptanceChecked, AcceptanceChecked, RunCompleted]
    assert [e.index for e in events[:2]] == [0, 1]  # type: ignore[union-attr]
    assert events[-1] == RunCompleted(detail="2 acceptance checks passed")
    assert log.s.status is R.COMPLETED
    assert len(log.s.checks) == 2


def test_a_run_without_declared_checks_completes_saying_so() -> None:
    log = Log.created(spec=make_spec().model_copy(update={"acceptance": ()}))
    do_model_turn(log, text("done"))
    assert do_accept(log) == [RunCompleted(detail="no acceptance checks were declared")]


def test_failing_checks_with_turns_left_go_back_to_the_model() -> None:
    log = accepting(max_turns=2)
    events = do_accept(log, check(True), check(False, reason="2 tests failed"))
    assert isinstance(events[-1], AcceptanceFailed)
    assert "check 2 (pytest -q exits 0): 2 tests failed" in events[-1].feedback
    assert "check 1" not in events[-1].feedback
    assert log.s.status is R.REQUESTING_MODEL
    assert log.s.current_turn.feedback == events[-1].feedback  # type: ignore[union-attr]


def test_failing_checks_without_turns_left_fail_the_run() -> None:
    log = accepting(max_turns=1)
    events = do_accept(log, check(False, reason="exit status 2"))
    assert events[-1] == RunFailed(
        reason="acceptance_failed",
        detail="acceptance failed (1 of 1 check: pytest -q exits 0: exit status 2)",
    )
    assert log.s.status is R.FAILED


def test_recording_the_verdict_again_returns_nothing() -> None:
    log = accepting()
    do_accept(log, check(True))
    assert record_acceptance(log.s, attempt=1, results=[check(True)]) == []


def test_a_last_check_that_ended_with_the_run_is_recorded_as_stopped_once() -> None:
    # its own timeout was what was left of the wall clock: it and the run end together,
    # and the run's end is recorded first; the check's evidence is not dropped
    log = accepting()
    log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    do_cancel(log)
    ended = log.s.updated_at
    late = check(False, reason="no exit within 3s: the run's wall clock ended")
    events = log.decide(record_acceptance, attempt=1, results=[check(True), late])
    assert events == [
        AcceptanceCheckStopped(
            attempt=1, index=1, check=late.check, requested_at=ended,
            stopped_at=late.checked_at, signals=(),
            detail="it ended as the run did, on its own: no exit within 3s: the run's wall clock ended",
        )
    ]  # fmt: skip
    assert log.s.status is R.CANCELLED
    assert record_acceptance(log.s, attempt=1, results=[late]) == []  # once
    assert record_acceptance(log.s, attempt=2, results=[late]) == []  # its own attempt only


def test_a_verdict_of_an_expired_attempt_is_ignored() -> None:
    log = accepting()
    log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    log.decide(start_acceptance, now=T0 + LEASE_S, lease_s=LEASE_S)
    assert record_acceptance(log.s, attempt=1, results=[check(True)]) == []


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ({"available": 1}, {"available": 1, "sku": "A1"}),
        ({"a": {"b": [1, {"c": 2}]}}, {"a": {"b": [1, {"c": 2, "d": 3}], "e": 0}}),
        ([1, 2], [1, 2]),
        ("A1", "A1"),
        (1, 1.0),
        ({}, {"anything": True}),
    ],
)
def test_a_tool_check_expectation_matches_a_superset_of_it(
    expected: object, actual: object
) -> None:
    assert contains(expected, actual)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ({"available": 1}, {"available": 2}),
        ({"available": 1}, {"sku": "A1"}),
        ({"a": 1}, [("a", 1)]),
        ([1, 2], [1, 2, 3]),
        ([1, 2], [2, 1]),
        (True, 1),
        (0, False),
        ("1", 1),
    ],
)
def test_a_tool_check_expectation_does_not_match_otherwise(
    expected: object, actual: object
) -> None:
    assert not contains(expected, actual)


# --- evidence older than a later write does not count -----------------------------


def accepting_after_a_write(*, writes: tuple[str, ...] = (), read_only: bool = False) -> Log:
    """A run whose one call (a write, or a read) finished at T0 + 11, then the model ended."""
    log = Log.created()
    name = "read_file" if read_only else "write_file"
    do_model_turn(log, use("w", name, path="a"))
    do_validate(log, "w", writes=writes)
    # appended by hand: a call that declares resources needs no lock service here
    log.append(ToolCallStarted(call_id="w", attempt=1, worker="w1", deadline_at=T0 + 100))
    do_finish(log, "w", Succeeded(output="ok"), now=T0 + 10)
    do_model_turn(log, text("done"))
    return log


def test_a_pass_on_evidence_gathered_before_a_later_write_does_not_count() -> None:
    log = accepting_after_a_write()
    events = do_accept(log, check(True, started_at=T0 + 5))
    checked, failed = events
    assert isinstance(checked, AcceptanceChecked) and not checked.passed
    assert (checked.started_at, checked.depends_on) == (T0 + 5, ("*",))
    reason = "stale evidence: write_file(w) wrote at 1011.000, after the check began"
    assert checked.evidence == {"exit_code": 0, "reason": reason}
    assert isinstance(failed, AcceptanceFailed)
    assert f"check 1 (pytest -q exits 0): {reason}" in failed.feedback
    assert log.s.status is R.REQUESTING_MODEL


def test_a_pass_on_evidence_gathered_after_the_last_write_counts() -> None:
    log = accepting_after_a_write()
    events = do_accept(log, check(True, started_at=T0 + 11))
    assert isinstance(events[-1], RunCompleted)


def test_a_write_to_another_resource_does_not_make_evidence_stale() -> None:
    log = accepting_after_a_write(writes=("file:b",))
    events = do_accept(log, check(True, started_at=T0, depends_on=("file:a",)))
    assert isinstance(events[-1], RunCompleted)


def test_a_write_to_the_resource_a_check_depends_on_makes_it_stale() -> None:
    log = accepting_after_a_write(writes=("file:a", "file:b"))
    events = do_accept(log, check(True, started_at=T0, depends_on=("file:a",)))
    assert isinstance(events[-1], AcceptanceFailed)


def test_a_read_never_makes_evidence_stale() -> None:
    log = accepting_after_a_write(read_only=True)
    events = do_accept(log, check(True, started_at=T0))
    assert isinstance(events[-1], RunCompleted)


def test_a_failing_check_keeps_its_own_reason() -> None:
    log = accepting_after_a_write()
    [checked, _] = do_accept(log, check(False, reason="2 tests failed", started_at=T0))
    assert checked.evidence == {"exit_code": 1, "reason": "2 tests failed"}  # type: ignore[union-attr]


def test_a_model_that_claims_all_tests_pass_while_they_fail_does_not_complete() -> None:
    log = accepting(max_turns=1)
    do_accept(log, check(False, reason="3 tests failed"))
    assert log.s.status is R.FAILED
    assert "3 tests failed" in log.s.detail
