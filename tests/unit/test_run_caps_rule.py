"""A tenant's cap of live runs on a task queue, the pure rule (events/run_caps.py):
the line's admissions and releases, first come first, idempotent both ways; the
operator's QUEUE=N,… read; a held run's status and its wall clock."""

from __future__ import annotations

import pytest
from runlog import Log, do_cancel

from agentledger.events.budgets import wall_clock_exceeded
from agentledger.events.dispatch import due_commands
from agentledger.events.run_caps import (
    Line,
    admit,
    cap_of,
    finish,
    held_event,
    left_line,
    parse_queue_caps,
    release,
)
from agentledger.events.status import RunStatus


def test_runs_go_live_up_to_the_cap_then_are_held_in_the_order_they_came() -> None:
    line = Line()
    places = []
    for run in ("r1", "r2", "r3", "r4"):
        line, place = admit(line, run, 2)
        places.append(place)
    assert places == [0, 0, 1, 2]
    assert line == Line(frozenset({"r1", "r2"}), ("r3", "r4"))


def test_asking_again_for_a_run_in_the_line_changes_nothing() -> None:
    line, _ = admit(Line(), "r1", 1)
    line, _ = admit(line, "r2", 1)
    assert admit(line, "r1", 1) == (line, 0)
    assert admit(line, "r2", 1) == (line, 1)


def test_a_run_that_ends_lets_the_first_held_run_go_live() -> None:
    line = Line(frozenset({"r1", "r2"}), ("r3", "r4"))
    line, released = finish(line, "r1", 2)
    assert released == ("r3",)
    assert line == Line(frozenset({"r2", "r3"}), ("r4",))


def test_an_end_told_twice_frees_one_place_only() -> None:
    line = Line(frozenset({"r1", "r2"}), ("r3", "r4"))
    line, first = finish(line, "r1", 2)
    line, again = finish(line, "r1", 2)
    assert (first, again) == (("r3",), ())
    assert line.live == {"r2", "r3"}


def test_cancelling_a_held_run_releases_nobody_and_keeps_the_others_order() -> None:
    line = Line(frozenset({"r1"}), ("r2", "r3", "r4"))
    line, released = finish(line, "r3", 1)
    assert released == ()
    assert line == Line(frozenset({"r1"}), ("r2", "r4"))


def test_a_newcomer_waits_behind_the_held_even_when_a_place_is_free() -> None:
    """A place freed and not yet taken goes to the first held run, not to a newcomer."""
    line = Line(frozenset(), ("r2",))
    line, place = admit(line, "r9", 1)
    assert place == 2


def test_a_raised_cap_releases_as_many_as_fit() -> None:
    line = Line(frozenset({"r1"}), ("r2", "r3", "r4"))
    _, released = finish(line, "r1", 3)
    assert released == ("r2", "r3", "r4")


def test_the_operators_caps_are_read_and_a_bad_entry_is_named() -> None:
    assert parse_queue_caps("default=2, q.x-1=10") == {"default": 2, "q.x-1": 10}
    assert cap_of(tuple(parse_queue_caps("default=2").items()), "default") == 2
    assert cap_of((("default", 2),), "other") is None
    with pytest.raises(ValueError, match="'de fault' is not a task queue name"):
        parse_queue_caps("de fault=2")
    with pytest.raises(ValueError, match="'default=0': the max must be at least 1"):
        parse_queue_caps("default=0")
    with pytest.raises(ValueError, match="'default' is not QUEUE=N"):
        parse_queue_caps("default")
    with pytest.raises(ValueError, match="'x' is not a whole number"):
        parse_queue_caps("default=x")


def test_a_held_run_is_due_nothing_until_released_then_its_first_model_request() -> None:
    log = Log.created()
    log.step(*held_event("acme", "default", 1, 1))
    assert log.s.status is RunStatus.HELD
    assert "place 1 in the line of tenant 'acme'" in log.s.detail
    assert due_commands(log.s, now=log.now, redrive=True) == []
    assert not log.s.status.watched  # the sweeper does not look at it
    assert release(log.s, now=log.now, queue="default", tenant="mallory") == []  # not its line
    assert release(log.s, now=log.now, queue="other", tenant="acme") == []
    log.decide(release, now=log.now + 3, queue="default", tenant="acme")
    assert log.s.status is RunStatus.REQUESTING_MODEL
    assert [type(c).__name__ for c in due_commands(log.s, now=log.now)] == ["RequestModel"]
    assert release(log.s, now=log.now, queue="default", tenant="acme") == []  # told twice: once


def test_a_held_runs_wall_clock_starts_at_its_release() -> None:
    log = Log.created(budgets={"max_wall_clock_s": 10.0})
    log.step(*held_event("acme", "default", 1, 1))
    log.decide(release, now=log.now + 60, queue="default", tenant="acme")
    assert wall_clock_exceeded(log.s, now=log.now + 5) is None
    assert wall_clock_exceeded(log.s, now=log.now + 11) is not None


def test_a_held_run_cancelled_ends_at_once_and_leaves_its_line() -> None:
    log = Log.created()
    log.step(*held_event("acme", "default", 1, 1))
    before = log.s
    do_cancel(log)
    assert log.s.status is RunStatus.CANCELLED
    assert left_line(before, log.s)
    assert not left_line(log.s, log.s)
