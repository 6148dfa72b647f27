"""The read-only retry rule (`agentledger.events.read_retry`), and that each step that
applies it — claiming, asking for locks again, what an unknown outcome leads to
— says what the rule says."""

from __future__ import annotations

from dataclasses import replace

import pytest
from runlog import Log, do_claim, do_model_turn, do_validate, use

from agentledger.events.lock_step import lock_asks
from agentledger.events.read_retry import MAX_READ_ATTEMPTS, retried, tries_left
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import claimable, unknown_outcome
from agentledger.events.types import RunEscalated, ToolCallFailed, ToolCallOutcomeUnknown

C = CallStatus


def _call(
    status: CallStatus, *, read_only: bool, attempts: int, reads: tuple[str, ...] = ()
) -> Call:
    return Call(
        call_id="c", turn=1, name="read_file", input={}, status=status, read_only=read_only,
        attempts=attempts, reads=reads,
    )  # fmt: skip


@pytest.mark.parametrize("attempts", range(0, MAX_READ_ATTEMPTS + 2))
def test_an_unknown_read_is_tried_again_while_it_has_tries_left(attempts: int) -> None:
    call = _call(C.OUTCOME_UNKNOWN, read_only=True, attempts=attempts)
    assert retried(call) is (attempts < MAX_READ_ATTEMPTS)


@pytest.mark.parametrize("attempts", [0, 1, MAX_READ_ATTEMPTS])
def test_an_unknown_write_is_never_tried_again(attempts: int) -> None:
    call = _call(C.OUTCOME_UNKNOWN, read_only=False, attempts=attempts)
    assert not tries_left(call) and not retried(call)


@pytest.mark.parametrize("status", sorted(set(CallStatus) - {C.OUTCOME_UNKNOWN}))
def test_only_an_unknown_outcome_is_retried(status: CallStatus) -> None:
    assert not retried(_call(status, read_only=True, attempts=1))


def _running_read(log: Log, *, attempts: int, reads: tuple[str, ...]) -> RunState:
    """The run with its one read's latest attempt `attempts` and its outcome unknown."""
    s = log.s
    assert s.current_turn is not None
    call = _call(C.OUTCOME_UNKNOWN, read_only=True, attempts=attempts, reads=reads)
    return replace(s, current_turn=replace(s.current_turn, calls=(call,)))


@pytest.mark.parametrize("attempts", range(1, MAX_READ_ATTEMPTS + 2))
@pytest.mark.parametrize("reads", [(), ("file:/w/x",)])
def test_claiming_and_asking_for_locks_follow_the_rule(
    attempts: int, reads: tuple[str, ...]
) -> None:
    log = Log.created()
    do_model_turn(log, use("c"))
    do_validate(log, "c")
    s = _running_read(log, attempts=attempts, reads=reads)
    call = s.call("c")
    assert call is not None and s.status is RunStatus.RUNNING_TOOLS
    expected = attempts < MAX_READ_ATTEMPTS
    if reads:  # it asks for its locks again before it may be claimed
        assert [a.call_id for a in lock_asks(s)] == (["c"] if expected else [])
        assert not claimable(call)
    else:
        assert claimable(call) is expected


@pytest.mark.parametrize("attempt", range(1, MAX_READ_ATTEMPTS + 1))
def test_the_unknown_outcome_of_a_reads_last_try_fails_it(attempt: int) -> None:
    log = Log.created()
    do_model_turn(log, use("r"))
    do_validate(log, "r")
    for _ in range(attempt):
        do_claim(log, "r")
        if log.call("r").attempts < attempt:
            log.step(*unknown_outcome(log.s, log.call("r"), "lost", at=log.now))
    events = unknown_outcome(log.s, log.call("r"), "lost", at=log.now)
    last = attempt == MAX_READ_ATTEMPTS
    assert [type(e) for e in events] == (
        [ToolCallOutcomeUnknown, ToolCallFailed] if last else [ToolCallOutcomeUnknown]
    )


def test_the_unknown_outcome_of_a_write_goes_to_a_person() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file"))
    do_validate(log, "w")
    do_claim(log, "w")
    events = unknown_outcome(log.s, log.call("w"), "lost", at=log.now)
    assert [type(e) for e in events] == [ToolCallOutcomeUnknown, RunEscalated]


@pytest.mark.parametrize("attempts", [MAX_READ_ATTEMPTS, MAX_READ_ATTEMPTS + 5, 100])
def test_a_delegate_call_is_tried_again_for_as_long_as_its_child_may_live(attempts: int) -> None:
    """Each try of a `delegate` call finds its child run again: a long child (past the
    claims of every try a read has) is still waited for, its end and spend recorded."""
    call = replace(_call(C.OUTCOME_UNKNOWN, read_only=True, attempts=attempts), name="delegate")
    assert tries_left(call) and retried(call)
    assert not retried(replace(call, read_only=False)), "a write is never tried again"
