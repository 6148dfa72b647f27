"""What one append did, as the metrics count it: the run's status moves, one per
change, in order, including those an append passes through without ending in."""

from __future__ import annotations

from agentledger.events.batch import Appended
from agentledger.events.fold import apply, fold
from agentledger.events.sample_run import sample_log
from agentledger.events.status import RunStatus

R = RunStatus


def test_moves_are_the_changes_along_the_statuses_after_each_event() -> None:
    log = sample_log()  # RunCreated, then two turns of one call, then the end of the turn
    before = fold(log[:2])  # created, the first model call claimed
    assert before is not None
    s, statuses = before, []
    for envelope in log[2:6]:  # the reply and the call's claim: one carried append
        s = apply(s, envelope)
        statuses.append(s.status)

    moves = Appended(before, s, log[2:6], statuses).moves()

    assert statuses == [R.VALIDATING, R.VALIDATING, R.RUNNING_TOOLS, R.RUNNING_TOOLS]
    assert moves == [(R.REQUESTING_MODEL, R.VALIDATING), (R.VALIDATING, R.RUNNING_TOOLS)]


def test_a_run_s_first_append_moves_from_nothing() -> None:
    created = fold(sample_log()[:1])
    assert created is not None

    assert Appended(None, created, [], [created.status]).moves() == [(None, R.REQUESTING_MODEL)]


def test_an_append_that_changes_no_status_makes_no_move() -> None:
    log = sample_log()
    before = fold(log[:1])
    assert before is not None
    after = apply(before, log[1])  # a model call claimed: requesting_model still

    assert Appended(before, after, log[1:2], [after.status]).moves() == []
