"""Time in which the sweeper could not reach Redis does not count against a
claim (`agentledger.events.claims`, the one rule of a claim's expiry): a deadline is counted
in reachable time (each window that began after the claim and before the
deadline moves it on by its length after the claim), so the worker that rode
out the outage with its outcome in hand lands it before the claim is judged;
windows outside the claim's life change nothing. Every step that asks whether a
claim expired — a tool call's (the sweeper), the turn's model request, the
acceptance, the lookup of an unknown write, and what the sweeper sends again —
answers by that rule."""

from __future__ import annotations

from runlog import (
    LEASE_S,
    T0,
    Log,
    do_claim,
    do_finish,
    do_model_turn,
    do_request,
    do_validate,
    text,
    use,
)

from agentledger.events.acceptance_step import acceptance_due, start_acceptance
from agentledger.events.claims import Window, expired, lapses_at
from agentledger.events.commands import RequestModel, ResolveCall, RunAcceptance
from agentledger.events.dispatch import due_commands
from agentledger.events.model_step import model_request_due
from agentledger.events.resolution_step import needs_resolution
from agentledger.events.state import Call
from agentledger.events.status import RunStatus
from agentledger.events.ticks import next_tick, on_tick
from agentledger.events.tool_step import TimedOut
from agentledger.events.types import Event, ToolCallOutcomeUnknown


def settles(events: list[Event]) -> bool:
    """The write is settled as outcome unknown (the run goes to a person with it)."""
    return isinstance(events[0], ToolCallOutcomeUnknown) if events else False


def claim_deadline(call: Call, unreachable: list[Window]) -> float | None:
    if call.claim_deadline is None:
        return None
    return lapses_at(call.claim_deadline, claimed_at=call.started_at, unreachable=unreachable)


def running_write() -> Log:
    log = Log.created()
    do_model_turn(log, use("w", "write_file"))
    do_validate(log, "w")
    assert log.s.status is RunStatus.RUNNING_TOOLS
    do_claim(log, "w", now=T0)
    return log


def test_an_outage_within_the_claims_life_moves_its_deadline_by_its_length() -> None:
    log = running_write()
    deadline = log.call("w").claim_deadline
    assert deadline is not None and deadline > T0 + 4
    outage = [(T0 + 1.0, T0 + 4.0)]
    assert claim_deadline(log.call("w"), outage) == deadline + 3.0
    assert settles(on_tick(log.s, now=deadline))
    assert on_tick(log.s, now=deadline, unreachable=outage) == [], "3 s of it were unreachable"
    assert on_tick(log.s, now=deadline + 2.9, unreachable=outage) == []
    assert settles(on_tick(log.s, now=deadline + 3.0, unreachable=outage))
    assert next_tick(log.s) == deadline
    assert next_tick(log.s, unreachable=outage) == deadline + 3.0, "the sweeper looks again then"


def test_only_windows_within_the_claims_life_count() -> None:
    log = running_write()
    deadline = log.call("w").claim_deadline
    assert deadline is not None
    call = log.call("w")
    assert claim_deadline(call, [(T0 - 10.0, T0 - 5.0)]) == deadline, "over before the claim"
    assert claim_deadline(call, [(T0 - 1.0, T0 + 2.0)]) == deadline + 2.0, "began before it"
    assert claim_deadline(call, [(deadline - 1.0, deadline + 5.0)]) == deadline + 6.0, (
        "ran past it: its time after the claim"
    )
    assert claim_deadline(call, [(deadline + 1.0, deadline + 5.0)]) == deadline, (
        "after the deadline"
    )
    two = [(T0 + 0.5, T0 + 1.0), (T0 + 2.0, T0 + 3.5)]
    assert claim_deadline(call, two) == deadline + 2.0


def test_a_call_not_running_has_no_deadline_to_move() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file"))
    assert claim_deadline(log.call("w"), [(T0, T0 + 100.0)]) is None


def test_no_claim_is_expired_whatever_the_windows() -> None:
    assert expired(None, now=T0, unreachable=[(T0 - 1.0, T0 + 100.0)])


def test_a_claim_whose_start_is_not_known_is_moved_only_by_the_outage_after_its_deadline() -> None:
    assert lapses_at(T0, unreachable=[(T0 - 20.0, T0 - 10.0)]) == T0
    assert lapses_at(T0, unreachable=[(T0 - 20.0, T0 + 5.0)]) == T0 + 5.0
    assert expired(T0, now=T0) and not expired(T0, now=T0 - 0.001)


OUTAGE_S = 3.0


def _outage_over(deadline: float) -> list[Window]:
    """Redis down from just before `deadline` until OUTAGE_S after it."""
    return [(deadline - 1.0, deadline + OUTAGE_S)]


def test_a_model_claim_holds_through_an_outage_over_its_deadline_then_the_sweeper_sends_it_again() -> (
    None
):
    log = Log.created()
    claimed = do_request(log, now=T0)
    outage = _outage_over(claimed.deadline_at)
    after = claimed.deadline_at + 1.0  # past the deadline, but within the outage's length after it
    assert model_request_due(log.s, now=after)
    assert not model_request_due(log.s, now=after, unreachable=outage)
    assert due_commands(log.s, now=after, redrive=True, unreachable=outage) == []
    later = claimed.deadline_at + OUTAGE_S
    assert model_request_due(log.s, now=later, unreachable=outage)
    assert due_commands(log.s, now=later, redrive=True, unreachable=outage) == [
        RequestModel(log.s.run_id)
    ]


def test_an_acceptance_claim_holds_through_an_outage_over_its_deadline() -> None:
    log = Log.created()
    do_model_turn(log, text("done"))
    [started] = log.decide(start_acceptance, now=T0, lease_s=LEASE_S)
    outage = _outage_over(started.deadline_at)  # type: ignore[union-attr]
    after = started.deadline_at + 1.0  # type: ignore[union-attr]
    assert acceptance_due(log.s, now=after)
    assert not acceptance_due(log.s, now=after, unreachable=outage)
    assert due_commands(log.s, now=after, redrive=True, unreachable=outage) == []
    later = started.deadline_at + OUTAGE_S  # type: ignore[union-attr]
    assert due_commands(log.s, now=later, unreachable=outage) == [RunAcceptance(log.s.run_id)]


def test_an_unknown_write_is_looked_up_only_once_its_claim_expired_in_reachable_time() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file"))
    do_validate(log, "w", op_key="write:y", resolvable=True)
    do_claim(log, "w", now=T0)
    do_finish(log, "w", TimedOut(after_s=1.0), now=T0 + 1.0)  # the write may have happened
    call = log.call("w")
    assert call.claim_deadline is not None
    outage = _outage_over(call.claim_deadline)
    after = call.claim_deadline + 1.0
    assert needs_resolution(call, now=after)
    assert not needs_resolution(call, now=after, unreachable=outage)
    assert ResolveCall(log.s.run_id, "w") not in due_commands(log.s, now=after, unreachable=outage)
    later = call.claim_deadline + 1.0 + OUTAGE_S
    assert needs_resolution(call, now=later, unreachable=outage)
