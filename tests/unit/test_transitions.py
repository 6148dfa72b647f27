"""The two transition tables, row by row. Each journey is a legal log built the
way the workers build it (through the decision functions); together they must
exercise every row of RUN_TRANSITIONS and CALL_TRANSITIONS that a log can take,
so a row added without a journey fails here. Then the refusals: illegal events
raise IllegalTransition naming the state, the event type and the run; gaps
raise BrokenLog; after a run ended only late records of running calls (and a
model reply after a cancel) may follow."""

from __future__ import annotations

from typing import get_args

import pytest
from journeys import ENDINGS, JOURNEYS, LATE_IDS, STOPPABLE, reach
from runlog import (
    RUN_ID,
    T0,
    Log,
    do_claim,
    do_finish,
    envelope,
    make_spec,
    text,
)

from agentledger.events.errors import BrokenLog, IllegalTransition
from agentledger.events.fold import apply, fold
from agentledger.events.status import TERMINAL, CallStatus, RunStatus
from agentledger.events.tool_step import Stopped, Succeeded, claim_call
from agentledger.events.transitions import CALL_TRANSITIONS, RUN_TRANSITIONS
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    CallEvent,
    ChildRunEnded,
    Event,
    HumanReplied,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunAborted,
    RunBudgetExhausted,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    RunResumed,
    RunTimedOut,
    ToolCallCancelled,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolError,
)

R, C = RunStatus, CallStatus


@pytest.mark.parametrize("name", sorted(JOURNEYS))
def test_each_legal_journey_folds_to_its_expected_status(name: str) -> None:
    build, expected = JOURNEYS[name]
    log = build()
    assert log.s.status is expected
    assert log.s.seq == len(log.envelopes)
    assert fold(log.envelopes) == log.s


def test_every_run_transition_a_log_can_take_is_exercised_by_a_legal_journey() -> None:
    seen: set[object] = set()
    for build, _ in JOURNEYS.values():
        seen |= build().run_moves
    assert RUN_TRANSITIONS - seen == set()
    assert seen - RUN_TRANSITIONS == set()


def test_every_event_has_rows_in_the_run_table_and_every_call_event_in_the_call_table() -> None:
    """An event added to the union without its legal moves could never be appended."""
    every_event = set(get_args(get_args(Event)[0]))
    assert every_event - {e for _, e, _ in RUN_TRANSITIONS} == set()
    call_events = set(get_args(CallEvent)) | {ToolCallProposed}
    assert {e for _, e in CALL_TRANSITIONS} == call_events


def test_every_call_transition_is_exercised_by_a_legal_journey() -> None:
    table = {(old, etype, new) for (old, etype), new in CALL_TRANSITIONS.items()}
    seen: set[object] = set()
    for build, _ in JOURNEYS.values():
        seen |= build().call_moves
    assert table - seen == set()
    assert seen - table == set()


def test_a_run_waiting_for_approval_has_no_proposed_call_and_an_accepting_one_no_call() -> None:
    """What the fold derives a run's phase from, on every journey's every state: the
    table needs no row out of awaiting_approval for a proposed call, nor out of
    accepting for a call event."""
    for build, _ in JOURNEYS.values():
        log, state = build(), None
        for env in log.envelopes:
            state = apply(state, env)
            calls = state.current_turn.calls if state.current_turn else ()
            if state.status is R.AWAITING_APPROVAL:
                assert all(c.status is not C.PROPOSED for c in calls)
            if state.status in (R.ACCEPTING, R.COMPLETED):
                assert calls == ()


# --- refusals ---------------------------------------------------------------------


def assert_names(err: IllegalTransition, status: object, event_type: str) -> None:
    message = str(err)
    assert repr(RUN_ID) in message
    assert repr(event_type) in message
    assert repr(str(status)) in message
    assert (err.status, err.event_type, err.run_id) == (status, event_type, RUN_ID)


def test_a_tool_call_cannot_start_before_it_is_validated() -> None:
    log = reach(R.VALIDATING)
    assert log.decide(claim_call, "a", worker="w", now=T0) == []
    with pytest.raises(IllegalTransition) as err:
        log.append(ToolCallStarted(call_id="a", attempt=1, worker="w", deadline_at=T0))
    assert_names(err.value, C.PROPOSED, "ToolCallStarted")


def test_a_run_cannot_complete_while_requesting_the_model() -> None:
    log = Log.created()
    with pytest.raises(IllegalTransition) as err:
        log.append(RunCompleted(detail="done"))
    assert_names(err.value, R.REQUESTING_MODEL, "RunCompleted")


@pytest.mark.parametrize(
    ("status", "event"),
    [
        (R.RUNNING_TOOLS, RunCancelled(requested_at=T0, by="c", side_effects=(), detail="")),
        (R.REQUESTING_MODEL, HumanReplied(by="dana", text="go on")),
        (R.ACCEPTING, RunResumed(by="dana")),
        (R.VALIDATING, RunAborted(by="dana")),
        (R.AWAITING_HUMAN, RunTimedOut(limit_s=1, elapsed_s=2, detail="late")),
        (R.AWAITING_HUMAN, ENDINGS["RunFailed"]),
        (R.AWAITING_APPROVAL, AcceptanceStarted(attempt=1, deadline_at=T0)),
        (R.CANCELLING, ENDINGS["RunFailed"]),
        (R.CANCELLING, ENDINGS["RunEscalated"]),
        (R.CANCELLING, RunTimedOut(limit_s=1, elapsed_s=2, detail="late")),
        (R.CANCELLING, RunCancelRequested(by="carol", source="cli")),
    ],
    ids=lambda x: str(x) if isinstance(x, RunStatus) else x.type,
)
def test_an_event_the_runs_state_does_not_allow_is_refused_naming_the_state(
    status: RunStatus, event: Event
) -> None:
    log = reach(status)
    with pytest.raises(IllegalTransition) as err:
        log.append(event)
    assert_names(err.value, status, event.type)


def test_a_call_event_the_calls_state_does_not_allow_is_refused_naming_that_state() -> None:
    log = reach(R.AWAITING_APPROVAL)
    with pytest.raises(IllegalTransition) as err:
        log.append(ToolCallStarted(call_id="a", attempt=1, worker="w", deadline_at=T0))
    assert_names(err.value, C.AWAITING_APPROVAL, "ToolCallStarted")
    assert "call 'a'" in str(err.value)


def test_a_running_call_is_not_cancelled_while_the_run_goes_on() -> None:
    log = reach(R.RUNNING_TOOLS)
    do_claim(log, "a")
    with pytest.raises(IllegalTransition) as err:
        log.append(ToolCallCancelled(call_id="a", requested_at=T0, stopped_at=T0 + 1))
    assert_names(err.value, R.RUNNING_TOOLS, "ToolCallCancelled")


def test_a_call_is_not_approved_twice() -> None:
    log = reach(R.AWAITING_APPROVAL)
    log.append(ApprovalGranted(call_id="a", by="bob"))
    log.append(ToolCallStarted(call_id="a", attempt=1, worker="w", deadline_at=T0 + 15))
    with pytest.raises(IllegalTransition) as err:
        log.append(ApprovalDenied(call_id="a", by="eve"))
    assert_names(err.value, C.STARTED, "ApprovalDenied")


def one_of_each_event() -> list[Event]:
    error = ToolError(code="internal", message="boom", retryable=False)
    contract = {"read_only": False, "timeout_s": 1.0}
    return [
        RunCreated(spec=make_spec()),
        ModelRequested(turn=1, attempt=1, deadline_at=T0),
        ModelRequestFailed(turn=1, attempt=1, kind="overloaded", cause="overloaded", retry_at=T0),
        ModelResponded(turn=1, content=(text("hi"),), stop_reason="end_turn", model="m"),
        ModelResponded(turn=2, content=(text("hi"),), stop_reason="end_turn", model="m"),
        ModelResponded(turn=3, content=(text("hi"),), stop_reason="end_turn", model="m"),
        ToolCallProposed(call_id="a", turn=1, name="read_file", input={}),
        ToolCallValidated(call_id="a", read_only=True, timeout_s=1.0),
        ApprovalRequested(call_id="a", **contract, expires_at=T0, reason="asks"),  # type: ignore[arg-type]
        ApprovalGranted(call_id="a", by="bob"),
        ApprovalDenied(call_id="a", by="bob"),
        ToolCallRejected(call_id="a", error=error),
        ToolCallStarted(call_id="a", attempt=1, worker="w", deadline_at=T0),
        ToolCallSucceeded(call_id="a", output=1, started_at=T0, finished_at=T0),
        ToolCallFailed(call_id="a", error=error, finished_at=T0),
        ToolCallOutcomeUnknown(call_id="a", reason="lost"),
        ToolCallCancelled(call_id="a", requested_at=T0, stopped_at=T0),
        ToolCallForceTerminated(call_id="a", requested_at=T0, terminated_at=T0, detail="kill"),
        AcceptanceStarted(attempt=1, deadline_at=T0),
        AcceptanceChecked(index=0, check="c", passed=True, evidence={}, checked_at=T0),
        AcceptanceCheckStopped(
            attempt=1,
            index=0,
            check="c",
            requested_at=T0,
            stopped_at=T0,
            signals=("SIGTERM",),
            detail="stopped",
        ),
        AcceptanceFailed(feedback="again"),
        RunCompleted(detail="done"),
        *ENDINGS.values(),
        RunTimedOut(limit_s=1, elapsed_s=2, detail="late"),
        RunCancelRequested(by="carol", source="cli"),
        RunCancelled(requested_at=T0, by="carol", side_effects=(), detail="cancelled"),
        HumanReplied(by="dana", text="go on"),
        RunResumed(by="dana"),
        RunAborted(by="dana"),
    ]


LATE: set[type[Event]] = {
    ToolCallSucceeded,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallCancelled,
    ToolCallForceTerminated,
}
# what may follow the end of a run: what its running calls did; after a cancel,
# also the model's reply to a request made before it
MAY_FOLLOW: dict[RunStatus, set[type[Event]]] = {
    s: (set() if s is R.COMPLETED else LATE)
    | ({ModelResponded} if s is R.CANCELLED else set())
    # a check the cancel or the wall clock stopped
    | ({AcceptanceCheckStopped} if s in (R.CANCELLED, R.TIMEOUT) else set())
    # a flow's child that ends after its parent did (its spend is still the parent's)
    | ({ChildRunEnded} if s in (R.FAILED, R.BUDGET_EXHAUSTED, R.TIMEOUT) else set())
    for s in TERMINAL
}


def test_after_a_run_ends_the_table_allows_only_late_records_that_leave_it_ended() -> None:
    rows = {(src, e, to) for src, e, to in RUN_TRANSITIONS if src in TERMINAL}
    assert rows == {(s, e, s) for s in TERMINAL for e in MAY_FOLLOW[s]}


TERMINAL_JOURNEYS = [
    "happy_path",
    "acceptance_retried_then_failed",
    "turns_exhausted",
    "model_error",
    "late_after_timeout",
    "late_while_cancelling",
    "reply_after_cancel",
]


@pytest.mark.parametrize(
    ("journey", "event"),
    [
        pytest.param(j, e, id=f"{j}-{e.type}-{i}")
        for j in TERMINAL_JOURNEYS
        for i, e in enumerate(one_of_each_event())
        if type(e) not in MAY_FOLLOW[JOURNEYS[j][1]]
    ],
)
def test_no_other_event_follows_a_terminal_event(journey: str, event: Event) -> None:
    log = JOURNEYS[journey][0]()
    status = log.s.status
    assert status.terminal
    with pytest.raises(IllegalTransition) as err:
        log.append(event)
    assert err.value.run_id == RUN_ID and err.value.event_type == event.type
    calls = log.s.current_turn.calls if log.s.current_turn else ()
    assert err.value.status in (status, *(c.status for c in calls))


@pytest.mark.parametrize("ending", ["late_after_timeout", "late_while_waiting_then_after_abort"])
def test_what_running_calls_did_is_recorded_after_the_run_ended(ending: str) -> None:
    log = JOURNEYS[ending][0]()
    assert log.s.status.terminal
    # each group of calls ran on while the run stopped, and ended each way a call can
    groups = [LATE_IDS, tuple(f"{c}x" for c in LATE_IDS)] if "abort" in ending else [LATE_IDS]
    for ids in groups:
        assert [log.call(c).status for c in ids] == [
            C.SUCCEEDED,
            C.FAILED,
            C.OUTCOME_UNKNOWN,
            C.CANCELLED,
            C.FORCE_TERMINATED,
        ]


def test_a_late_record_needs_a_call_that_was_running() -> None:
    log = JOURNEYS["late_after_timeout"][0]()
    with pytest.raises(IllegalTransition) as err:  # recorded already
        log.append(ToolCallSucceeded(call_id="l1", output=1, started_at=T0, finished_at=T0))
    assert_names(err.value, C.SUCCEEDED, "ToolCallSucceeded")
    with pytest.raises(IllegalTransition) as err:
        log.append(ToolCallCancelled(call_id="nope", requested_at=T0, stopped_at=T0))
    assert_names(err.value, R.TIMEOUT, "ToolCallCancelled")


def test_a_run_that_stopped_twice_is_refused() -> None:
    log = JOURNEYS["late_after_timeout"][0]()
    with pytest.raises(IllegalTransition) as err:
        log.append(RunTimedOut(limit_s=600, elapsed_s=700, detail="again"))
    assert_names(err.value, R.TIMEOUT, "RunTimedOut")


def test_late_outcomes_after_a_cancel_end_the_run_only_when_the_last_call_stopped() -> None:
    log = reach(R.CANCELLING)  # a is running
    assert log.s.in_flight and log.s.status is R.CANCELLING
    do_finish(log, "a", Stopped(requested_at=log.s.cancel_requested_at or 0.0, killed=False))
    assert log.s.status is R.CANCELLED


@pytest.mark.parametrize("turn", [2, 3])
def test_a_model_response_must_answer_the_next_turn(turn: int) -> None:
    log = Log.created()
    with pytest.raises(IllegalTransition) as err:
        log.append(ModelResponded(turn=turn, content=(), stop_reason="end_turn", model="m"))
    assert_names(err.value, R.REQUESTING_MODEL, "ModelResponded")
    assert f"turn {turn} follows 0" in str(err.value)


def test_a_turn_already_answered_cannot_be_answered_again() -> None:
    log = reach(R.RUNNING_TOOLS)
    do_claim(log, "a")
    do_finish(log, "a", Succeeded(output="x"))
    assert log.s.status is R.REQUESTING_MODEL
    with pytest.raises(IllegalTransition) as err:
        log.append(ModelResponded(turn=1, content=(), stop_reason="end_turn", model="m"))
    assert_names(err.value, R.REQUESTING_MODEL, "ModelResponded")


def test_a_run_is_created_only_once() -> None:
    log = Log.created()
    with pytest.raises(IllegalTransition) as err:
        log.append(RunCreated(spec=make_spec()))
    assert_names(err.value, R.REQUESTING_MODEL, "RunCreated")


def test_a_log_starts_with_run_created() -> None:
    with pytest.raises(IllegalTransition) as err:
        Log().append(ModelRequested(turn=1, attempt=1, deadline_at=T0))
    assert_names(err.value, None, "ModelRequested")


def test_an_unknown_call_cannot_be_validated() -> None:
    log = reach(R.VALIDATING)
    with pytest.raises(IllegalTransition) as err:
        log.append(ToolCallValidated(call_id="nope", read_only=True, timeout_s=1.0))
    assert_names(err.value, R.VALIDATING, "ToolCallValidated")
    assert "'nope'" in str(err.value)


def test_a_call_cannot_be_proposed_twice_in_a_turn() -> None:
    log = reach(R.VALIDATING)
    with pytest.raises(IllegalTransition):
        log.append(ToolCallProposed(call_id="a", turn=1, name="read_file", input={}))


def test_a_call_proposed_for_another_turn_names_the_runs_state() -> None:
    log = reach(R.VALIDATING)
    with pytest.raises(IllegalTransition) as err:
        log.append(ToolCallProposed(call_id="b", turn=2, name="read_file", input={}))
    assert_names(err.value, R.VALIDATING, "ToolCallProposed")


@pytest.mark.parametrize("status", STOPPABLE)
def test_a_stoppable_run_can_be_cancelled_failed_timed_out_exhausted_or_escalated(
    status: RunStatus,
) -> None:
    for event in (RunFailed, RunBudgetExhausted, RunTimedOut, RunEscalated, RunCancelRequested):
        assert any(s is status and e is event for s, e, _ in RUN_TRANSITIONS)


@pytest.mark.parametrize("seq", [1, 3, 7])
def test_a_seq_out_of_order_breaks_the_log(seq: int) -> None:
    log = Log.created()
    with pytest.raises(BrokenLog) as err:
        apply(log.state, envelope(ModelRequested(turn=1, attempt=1, deadline_at=T0), seq=seq))
    assert err.value.seq == seq and err.value.run_id == RUN_ID
    assert "expected seq 2" in str(err.value) and repr(RUN_ID) in str(err.value)


def test_a_log_whose_first_seq_is_not_1_is_broken() -> None:
    with pytest.raises(BrokenLog) as err:
        fold([envelope(RunCreated(spec=make_spec()), seq=2)])
    assert err.value.seq == 2


def test_an_event_of_another_run_breaks_the_log() -> None:
    log = Log.created()
    other = envelope(ModelRequested(turn=1, attempt=1, deadline_at=T0), seq=2, run_id="run-2")
    with pytest.raises(BrokenLog) as err:
        apply(log.state, other)
    assert "'run-2'" in str(err.value)
