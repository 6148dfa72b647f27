"""Stop reason -> what follows (`agentledger.events.stop_reasons`), for every stop reason the
API sends: the fold moves the run where the rule says, and the model step's
batch takes it on from there as the rule says (calls validated, acceptance,
asked again, or failed)."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from runlog import Log, do_model_turn, text, use

from agentledger.events.status import RunStatus
from agentledger.events.stop_reasons import AfterStop, after_stop, status_after_reply
from agentledger.events.types import ModelResponded, RunEscalated, RunFailed, StopReason

R = RunStatus
EVERY_STOP: tuple[StopReason, ...] = get_args(StopReason)

# where a reply with no tool_use leaves the run once its batch is appended, by
# the rule's answer, with the policies that let it go on where it can
WITHOUT_CALLS = {
    AfterStop.RUN_CALLS: R.REQUESTING_MODEL,  # tool_use with no block: a broken reply, failed below
    AfterStop.ACCEPT: R.ACCEPTING,
    AfterStop.CUT_OFF: R.REQUESTING_MODEL,
    AfterStop.ASK_AGAIN: R.REQUESTING_MODEL,
    AfterStop.REFUSED: R.AWAITING_HUMAN,
    AfterStop.FAIL: R.FAILED,
}
GO_ON: dict[str, Any] = {"on_max_tokens": "continue", "on_refusal": "escalate"}


def test_every_stop_reason_has_a_meaning() -> None:
    assert {after_stop(r) for r in EVERY_STOP} == set(AfterStop)
    assert after_stop("end_turn") is after_stop("stop_sequence") is AfterStop.ACCEPT


@pytest.mark.parametrize("stop", EVERY_STOP)
def test_a_reply_that_asks_for_tools_is_validated_whatever_its_stop(stop: StopReason) -> None:
    assert status_after_reply(stop, asks_for_tools=True) is R.VALIDATING


@pytest.mark.parametrize("stop", EVERY_STOP)
def test_the_fold_and_the_model_step_follow_the_rule(stop: StopReason) -> None:
    log = Log.created(policies=GO_ON)
    events = do_model_turn(log, text("hm"), stop=stop)
    replied = events[0]
    assert isinstance(replied, ModelResponded)
    meaning = after_stop(stop)
    if meaning is AfterStop.RUN_CALLS:  # no tool_use block: the model broke the protocol
        assert isinstance(events[-1], RunFailed) and events[-1].reason == "model_protocol"
        return
    assert log.s.status is WITHOUT_CALLS[meaning]
    if meaning is AfterStop.REFUSED:
        assert isinstance(events[-1], RunEscalated)


@pytest.mark.parametrize("stop", EVERY_STOP)
def test_a_reply_with_calls_goes_to_validation_or_fails(stop: StopReason) -> None:
    log = Log.created(policies=GO_ON)
    do_model_turn(log, use("a"), stop=stop)
    meaning = after_stop(stop)
    if meaning is AfterStop.FAIL:
        assert log.s.status is R.FAILED
    elif meaning is AfterStop.REFUSED:
        assert log.s.status is R.AWAITING_HUMAN
    elif meaning is AfterStop.CUT_OFF:
        assert log.s.status is R.REQUESTING_MODEL  # its calls are answered as cut off, never run
    else:
        assert log.s.status is R.VALIDATING
