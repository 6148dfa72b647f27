"""When the sweeper next looks at a run (`agentledger.events.looks.next_look`): a
run with work due to a worker after a lease (or its deadline, if sooner); a run
parked on an approval at its deadline only (the approval's expiry, the wall
clock); a run that needs no look, never."""

from __future__ import annotations

from dataclasses import replace

from runlog import T0, Log, do_model_turn, do_request, do_validate, use

from agentledger.events import controls
from agentledger.events.looks import next_look, parked, wall_clock_at
from agentledger.events.status import RunStatus

LEASE = 2.0
ASK = "a person decides"


def asked(*, timeout_s: float = 3600.0, wall_s: float | None = None) -> Log:
    budgets = {"max_wall_clock_s": wall_s} if wall_s else {}
    log = Log.created(policies={"approval_timeout_s": timeout_s}, budgets=budgets)
    do_model_turn(log, use("w0", "write_file", path="/f0"))
    do_validate(log, "w0", needs_approval=ASK, now=T0 + 5)
    return log


def test_a_run_waiting_for_an_approval_is_looked_at_when_the_approval_expires() -> None:
    log = asked(timeout_s=600)
    assert log.s.status is RunStatus.AWAITING_APPROVAL and parked(log.s, now=T0 + 6)
    expires = T0 + 5 + 600
    assert next_look(log.s, at=T0 + 6, lease_s=LEASE) == expires
    assert next_look(log.s, at=expires - 1, lease_s=LEASE) == expires


def test_a_parked_runs_wall_clock_comes_first_when_it_is_sooner() -> None:
    log = asked(timeout_s=600, wall_s=100)
    assert wall_clock_at(log.s) == log.s.created_at + 100
    assert next_look(log.s, at=T0 + 6, lease_s=LEASE) == log.s.created_at + 100


def test_a_deadline_already_past_is_not_waited_for_the_run_is_looked_at_after_a_lease() -> None:
    log = asked(timeout_s=600)
    late = T0 + 5 + 600 + 30  # the look at `late` could not settle it (a conflict)
    assert next_look(log.s, at=late, lease_s=LEASE) == late + LEASE


def test_a_run_with_a_command_due_is_looked_at_after_a_lease() -> None:
    log = Log.created()
    assert not parked(log.s, now=T0)
    assert next_look(log.s, at=T0 + 1, lease_s=LEASE) == T0 + 1 + LEASE, "its message may be lost"


def test_a_claim_running_out_within_the_lease_is_looked_at_then() -> None:
    log = Log.created()
    claimed = do_request(log)
    lease = claimed.deadline_at - log.s.updated_at + 5  # the claim runs out before the lease
    assert next_look(log.s, at=log.s.updated_at, lease_s=lease) == claimed.deadline_at


def test_a_run_waiting_for_a_person_with_a_claim_held_is_not_parked() -> None:
    held = replace(asked().s, model_claim_deadline=T0 + 500)  # a worker holds a claim of it
    assert held.status is RunStatus.AWAITING_APPROVAL
    assert not parked(held, now=T0 + 6)
    assert next_look(held, at=T0 + 6, lease_s=LEASE) == T0 + 6 + LEASE, "its worker may die"


def test_an_answer_puts_the_run_back_under_the_lease() -> None:
    log = asked()
    log.decide(controls.approve, "w0", by="bob", note="")
    assert not parked(log.s, now=T0 + 7)
    assert next_look(log.s, at=T0 + 7, lease_s=LEASE) == T0 + 7 + LEASE


def test_a_cancelled_or_ended_run_is_not_looked_at() -> None:
    log = asked()
    log.decide(controls.cancel, by="bob", source="cli", reason="stop")
    assert next_look(log.s, at=T0 + 7, lease_s=LEASE) is None
    assert not parked(log.s, now=T0 + 7)
