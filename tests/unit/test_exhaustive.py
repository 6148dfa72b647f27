"""Closed sets are handled whole: every run status has an exit code (an ended one
its own), every event of the union a timeline line and a step of the fold, and
every call event its change of the call. They iterate over the real enum and
unions, so a member added without its handling fails here (and mypy fails on the
`assert_never` of `exit_codes.for_status` and `describe.summary`; the fold's
tables are dicts keyed by class, which mypy cannot count)."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from journeys import JOURNEYS

from agentledger.events import fold, fold_calls
from agentledger.events.status import TERMINAL, RunStatus
from agentledger.events.types import CallEvent, Event
from agentledger.schemas.envelope import Envelope
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.describe import line, summary

EVERY_EVENT: tuple[type[Any], ...] = get_args(get_args(Event)[0])
COMMAND_CODES = {
    name: value
    for name, value in vars(exit_codes).items()
    if name.isupper() and isinstance(value, int)
}


@pytest.mark.parametrize("status", list(RunStatus))
def test_every_run_status_has_an_exit_code(status: RunStatus) -> None:
    code = exit_codes.for_status(status)
    if status.terminal or status is RunStatus.AWAITING_HUMAN:
        assert code == exit_codes.BY_STATUS[status] != exit_codes.STILL_LIVE
    else:
        assert code == exit_codes.STILL_LIVE


def test_each_ended_state_has_a_code_of_its_own() -> None:
    ended = [exit_codes.BY_STATUS[s] for s in sorted(TERMINAL)]
    assert len(set(ended)) == len(ended)
    assert set(exit_codes.BY_STATUS) == {*TERMINAL, RunStatus.AWAITING_HUMAN}
    # an end is told apart from every way a command fails, but for `failed`, which is
    # what a failed check of `replay` or `context` says too
    clashing = {n for n, v in COMMAND_CODES.items() if v in ended} - {"CHECK_FAILED"}
    assert clashing == set()


def _one_of_each() -> dict[type[Any], Envelope[Any]]:
    """An envelope of every event type the legal journeys append."""
    found: dict[type[Any], Envelope[Any]] = {}
    for build, _ in JOURNEYS.values():
        for env in build().envelopes:
            found.setdefault(type(env.data), env)
    return found


SEEN = _one_of_each()


@pytest.mark.parametrize("event_class", EVERY_EVENT, ids=lambda c: c.__name__)
def test_every_event_has_a_timeline_line(event_class: type[Any]) -> None:
    env = SEEN.get(event_class)
    assert env is not None, f"no journey appends a {event_class.__name__}"
    assert summary(env.data).strip(), f"{event_class.__name__} has an empty timeline line"
    assert env.type in line(env)


def test_the_fold_has_a_step_for_every_event_and_nothing_else() -> None:
    assert set(fold.STEPS) == set(EVERY_EVENT)


def test_every_call_event_says_what_it_changes_in_its_call() -> None:
    assert set(fold_calls.CHANGES) == set(get_args(CallEvent))
    assert set(get_args(CallEvent)) < set(EVERY_EVENT)
