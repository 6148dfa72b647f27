"""Time in which the sweeper could not reach Redis does not count against a
claim: a running call's deadline is counted in reachable time (each window that
began after the claim and before the deadline moves it on by its length after
the claim), so the worker that rode out the outage with its outcome in hand
lands it before the claim is judged; windows outside the claim's life change
nothing."""

from __future__ import annotations

from runlog import T0, Log, do_claim, do_model_turn, do_validate, use

from events.status import RunStatus
from events.ticks import claim_deadline, on_tick
from events.types import Event, ToolCallOutcomeUnknown


def settles(events: list[Event]) -> bool:
    """The write is settled as outcome unknown (the run goes to a person with it)."""
    return isinstance(events[0], ToolCallOutcomeUnknown) if events else False


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
