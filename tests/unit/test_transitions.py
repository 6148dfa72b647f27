"""The two transition tables, row by row. Each journey is a legal log built the
way the workers build it (through the decision functions); together they must
exercise every row of RUN_TRANSITIONS and CALL_TRANSITIONS, so a row added
without a journey fails here. Then the refusals: illegal events raise
IllegalTransition naming the state, the event type and the run; gaps raise
BrokenLog."""

from __future__ import annotations

import pytest
from journeys import ENDINGS, JOURNEYS, reach
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

from events.errors import BrokenLog, IllegalTransition
from events.fold import apply, fold
from events.status import CallStatus, RunStatus
from events.tool_step import Succeeded, claim_call
from events.transitions import CALL_TRANSITIONS, RUN_TRANSITIONS
from events.types import (
    AcceptanceChecked,
    AcceptanceFailed,
    AcceptanceStarted,
    Event,
    ModelRequested,
    ModelResponded,
    RunCompleted,
    RunCreated,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolError,
)

R = RunStatus


@pytest.mark.parametrize("name", sorted(JOURNEYS))
def test_each_legal_journey_folds_to_its_expected_status(name: str) -> None:
    build, expected = JOURNEYS[name]
    log = build()
    assert log.s.status is expected
    assert log.s.seq == len(log.envelopes)


def test_every_run_transition_is_exercised_by_a_legal_journey() -> None:
    seen: set[object] = set()
    for build, _ in JOURNEYS.values():
        seen |= build().run_moves
    assert RUN_TRANSITIONS - seen == set()
    assert seen - RUN_TRANSITIONS == set()


def test_every_call_transition_is_exercised_by_a_legal_journey() -> None:
    table = {(old, etype, new) for (old, etype), new in CALL_TRANSITIONS.items()}
    seen: set[object] = set()
    for build, _ in JOURNEYS.values():
        seen |= build().call_moves
    assert table - seen == set()
    assert seen - table == set()


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
    assert_names(err.value, CallStatus.PROPOSED, "ToolCallStarted")


def test_a_run_cannot_complete_while_requesting_the_model() -> None:
    log = Log.created()
    with pytest.raises(IllegalTransition) as err:
        log.append(RunCompleted(detail="done"))
    assert_names(err.value, R.REQUESTING_MODEL, "RunCompleted")


def one_of_each_event() -> list[Event]:
    error = ToolError(code="internal", message="boom", retryable=False)
    return [
        RunCreated(spec=make_spec()),
        ModelRequested(turn=1, attempt=1, deadline_at=T0),
        ModelResponded(turn=1, content=(text("hi"),), stop_reason="end_turn", model="m"),
        ModelResponded(turn=2, content=(text("hi"),), stop_reason="end_turn", model="m"),
        ToolCallProposed(call_id="a", turn=1, name="read_file", input={}),
        ToolCallValidated(call_id="a", read_only=True, timeout_s=1.0),
        ToolCallRejected(call_id="a", error=error),
        ToolCallStarted(call_id="a", attempt=1, worker="w", deadline_at=T0),
        ToolCallSucceeded(call_id="a", output=1, started_at=T0, finished_at=T0),
        ToolCallFailed(call_id="a", error=error, finished_at=T0),
        ToolCallOutcomeUnknown(call_id="a", reason="lost"),
        AcceptanceStarted(attempt=1, deadline_at=T0),
        AcceptanceChecked(index=0, check="c", passed=True, evidence={}, checked_at=T0),
        AcceptanceFailed(feedback="again"),
        RunCompleted(detail="done"),
        *ENDINGS.values(),
    ]


TERMINAL_JOURNEYS = [
    "happy_path",
    "acceptance_retried_then_failed",
    "turns_exhausted",
    "model_error",
]


@pytest.mark.parametrize(
    ("journey", "event"),
    [
        pytest.param(
            j,
            e,
            id=f"{j}-{e.type}",
        )
        for j in TERMINAL_JOURNEYS
        for e in one_of_each_event()
    ],
)
def test_no_event_follows_a_terminal_event(journey: str, event: Event) -> None:
    log = JOURNEYS[journey][0]()
    assert log.s.status.terminal
    with pytest.raises(IllegalTransition) as err:
        log.append(event)
    assert err.value.run_id == RUN_ID and err.value.event_type == event.type


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
