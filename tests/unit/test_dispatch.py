"""Given a run's folded state, which commands are due: one per step some worker
can take now, none while a live claim holds the step, none once the run waits
for a human or has ended; and what a writer sends after its batch: only what
the batch made due."""

from __future__ import annotations

import pytest
from journeys import JOURNEYS, reach
from runlog import (
    LEASE_S,
    RUN_ID,
    T0,
    Log,
    do_claim,
    do_finish,
    do_model_turn,
    do_validate,
    text,
    use,
)

from agentledger.events.acceptance_step import start_acceptance
from agentledger.events.commands import DriveCall, Pool, RequestModel, RunAcceptance
from agentledger.events.dispatch import carried_command, due_commands, new_commands
from agentledger.events.model_step import request_model
from agentledger.events.status import RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import Succeeded, TimedOut, claim_call

R = RunStatus


def test_a_run_requesting_the_model_is_due_a_model_request() -> None:
    assert due_commands(Log.created().s, now=T0) == [RequestModel(RUN_ID)]


def test_a_live_model_claim_makes_nothing_due_until_its_deadline() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    assert due_commands(log.s, now=T0 + LEASE_S - 0.001) == []
    assert due_commands(log.s, now=T0 + LEASE_S) == [RequestModel(RUN_ID)]


def test_a_validating_run_is_due_one_step_that_validates_the_whole_turn() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"), use("c"))
    do_validate(log, "b")
    assert due_commands(log.s, now=T0) == [DriveCall(RUN_ID, "a")]


def test_a_run_running_tools_is_due_a_step_per_claimable_call() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"), use("c"))
    for call_id in "abc":
        do_validate(log, call_id)
    do_claim(log, "a")  # claimed: not due
    do_claim(log, "b")
    do_finish(log, "b", Succeeded(output=1))  # done: not due
    assert due_commands(log.s, now=T0) == [DriveCall(RUN_ID, "c")]


def test_calls_that_need_locks_are_due_one_step_that_asks_for_the_turns_locks() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("w", "write_file", path="x"), use("v", "write_file", path="y"))
    do_validate(log, "a")
    do_validate(log, "w", writes=["file:x"])
    do_validate(log, "v", writes=["file:y"])
    assert due_commands(log.s, now=T0) == [DriveCall(RUN_ID, "w"), DriveCall(RUN_ID, "a")]


def test_a_writer_sends_only_what_its_batch_made_due() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"))
    for call_id in "ab":
        do_validate(log, call_id)
    before = log.s
    do_claim(log, "a")
    assert new_commands(before, log.s, now=T0) == []  # b was due already
    before = log.s
    do_finish(log, "a", Succeeded(output=1))
    assert new_commands(before, log.s, now=T0) == []  # b still runs: the turn is not over
    do_claim(log, "b")
    before = log.s
    do_finish(log, "b", Succeeded(output=2))
    assert new_commands(before, log.s, now=T0) == [RequestModel(RUN_ID)]


def test_a_run_with_one_call_at_a_time_sends_the_next_when_the_first_ends() -> None:
    log = Log.created(budgets={"max_parallel_calls": 1})
    do_model_turn(log, use("a"), use("b"))
    for call_id in "ab":
        do_validate(log, call_id)
    do_claim(log, "a")
    assert due_commands(log.s, now=T0) == []
    before = log.s
    do_finish(log, "a", Succeeded(output=1))
    assert new_commands(before, log.s, now=T0) == [DriveCall(RUN_ID, "b")]


def test_a_read_whose_claim_expired_is_due_again() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"))
    do_validate(log, "a")
    do_validate(log, "b")
    do_claim(log, "a")
    do_claim(log, "b")
    deadline = log.s.call("a").claim_deadline  # type: ignore[union-attr]
    log.decide(on_tick, now=deadline)
    assert due_commands(log.s, now=deadline) == [DriveCall(RUN_ID, "a"), DriveCall(RUN_ID, "b")]


def test_an_accepting_run_is_due_acceptance_unless_a_live_claim_holds_it() -> None:
    log = Log.created()
    do_model_turn(log, text("done"))
    assert due_commands(log.s, now=T0) == [RunAcceptance(RUN_ID)]
    log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    assert due_commands(log.s, now=T0 + 1) == []
    assert due_commands(log.s, now=T0 + LEASE_S) == [RunAcceptance(RUN_ID)]


def test_a_run_waiting_for_a_human_is_due_nothing() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file"))
    do_validate(log, "w")
    do_claim(log, "w")
    do_finish(log, "w", TimedOut(after_s=10.0))
    assert log.s.status is R.AWAITING_HUMAN
    assert due_commands(log.s, now=T0 + 1e6) == []


@pytest.mark.parametrize(
    "journey", [name for name, (_, status) in sorted(JOURNEYS.items()) if status.terminal]
)
def test_an_ended_run_is_due_nothing(journey: str) -> None:
    log = JOURNEYS[journey][0]()
    assert due_commands(log.s, now=T0 + 1e6) == []


@pytest.mark.parametrize("status", [R.AWAITING_APPROVAL, R.AWAITING_HUMAN, R.CANCELLING])
def test_a_run_waiting_for_a_person_or_stopping_is_due_no_command(status: RunStatus) -> None:
    log = reach(status)
    assert due_commands(log.s, now=T0 + 1e6) == []


def test_a_validated_call_waits_while_another_call_of_its_turn_awaits_approval() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("w", "write_file", path="y"))
    do_validate(log, "a")
    do_validate(log, "w", needs_approval="writes need a person")
    assert log.s.status is R.AWAITING_APPROVAL
    assert due_commands(log.s, now=T0) == []
    assert claim_call(log.s, "a", worker="w", now=T0) == []


ALL = frozenset(Pool)


def test_a_writer_serving_the_model_pool_carries_the_model_request_that_became_due() -> None:
    log = Log.created()
    assert carried_command(log.s, now=T0, pools=ALL) == RequestModel(RUN_ID)
    assert carried_command(log.s, now=T0, pools={Pool.TOOLS, Pool.ACCEPT}) is None


def test_a_writer_serving_the_tools_pool_carries_the_turn_s_first_call_drive() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"))
    assert carried_command(log.s, now=T0, pools=ALL) == DriveCall(RUN_ID, "a")
    assert carried_command(log.s, now=T0, pools={Pool.MODEL}) is None


def test_a_live_claim_leaves_nothing_to_carry() -> None:
    log = Log.created()
    log.decide(request_model, now=T0, lease_s=LEASE_S)
    assert carried_command(log.s, now=T0, pools=ALL) is None


def test_a_writer_serving_the_accept_pool_carries_the_acceptance_that_became_due() -> None:
    log = Log.created()
    do_model_turn(log, text("done"))
    assert due_commands(log.s, now=T0) == [RunAcceptance(RUN_ID)]
    assert carried_command(log.s, now=T0, pools=ALL) == RunAcceptance(RUN_ID)
    assert carried_command(log.s, now=T0, pools={Pool.MODEL, Pool.TOOLS}) is None
