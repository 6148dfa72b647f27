"""The one stop rule of a follower (`agentledger.events.following`): each rule stops at the
statuses it names and goes on through the others; no run yet never stops it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agentledger.events.fold import fold
from agentledger.events.following import Until, reached
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from tests.contracts.envelopes import batch

R = RunStatus


@pytest.fixture
def live() -> RunState:
    state = fold(batch("run-a", 1, 1))
    assert state is not None and state.status is R.REQUESTING_MODEL
    return state


@pytest.mark.parametrize(
    ("status", "stops"),
    [
        (R.REQUESTING_MODEL, {Until.OVER: False, Until.SETTLED: False, Until.ASKS_A_PERSON: False}),
        (R.AWAITING_APPROVAL, {Until.OVER: False, Until.SETTLED: False, Until.ASKS_A_PERSON: True}),
        (R.AWAITING_HUMAN, {Until.OVER: False, Until.SETTLED: True, Until.ASKS_A_PERSON: True}),
        (R.COMPLETED, {Until.OVER: True, Until.SETTLED: True, Until.ASKS_A_PERSON: True}),
        (R.CANCELLED, {Until.OVER: True, Until.SETTLED: True, Until.ASKS_A_PERSON: True}),
    ],
)
def test_each_rule_stops_at_the_statuses_it_names(
    live: RunState, status: RunStatus, stops: dict[Until, bool]
) -> None:
    state = replace(live, status=status)

    assert {rule: reached(rule, state) for rule in stops} == stops
    assert reached(Until.NEVER, state) is False


def test_no_run_yet_stops_no_rule() -> None:
    assert [reached(rule, None) for rule in Until] == [False] * len(Until)
