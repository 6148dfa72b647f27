"""One step of a call (`DriveCall`): the turn's undecided calls are validated,
the lock table's answers recorded, and the call claimed when it may run — in
one batch. And which lock requests a run gives up once a batch is appended."""

from __future__ import annotations

from runlog import T0, TOOLS, Log, do_cancel, do_claim, do_finish, do_model_turn, do_validate, use

from agentledger.events.call_step import LockAnswers, asks_for, drive_call, validated
from agentledger.events.lock_step import held_requests, record_lock, released_asks, request_id
from agentledger.events.locks import Grant, Mode
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.tool_step import Succeeded, TimedOut
from agentledger.events.types import (
    ToolCallRejected,
    ToolCallScheduled,
    ToolCallStarted,
    ToolCallValidated,
    ToolCallWaiting,
)
from agentledger.events.validation_step import Finding

R, C = RunStatus, CallStatus
READ = Finding(tool=TOOLS["read_file"])


def write(path: str) -> Finding:
    return Finding(tool=TOOLS["write_file"], writes=(f"file:{path}",), op_key=f"w:{path}")


def released_ids(before: RunState | None, after: RunState) -> list[str]:
    """The ids of the lock requests released once `after` is the log's state."""
    return [a.request_id for a in released_asks(before, after)]


def test_a_call_that_needs_no_lock_is_validated_and_claimed_in_one_batch() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("b"))
    events = drive_call(
        log.s, "a", findings={"a": READ, "b": READ}, known_tools=sorted(TOOLS),
        locks=LockAnswers(), worker="w1", now=T0,
    )  # fmt: skip
    assert [type(e) for e in events] == [ToolCallValidated, ToolCallValidated, ToolCallStarted]
    assert isinstance(events[2], ToolCallStarted) and events[2].call_id == "a"
    log.step(*events)
    assert log.call("a").status is C.STARTED and log.call("b").status is C.VALIDATED


def test_an_unknown_tool_is_rejected_and_the_other_calls_go_on() -> None:
    log = Log.created()
    do_model_turn(log, use("a", "no_such_tool"), use("b"))
    findings = {"a": Finding(tool=None), "b": READ}
    events = drive_call(
        log.s, "a", findings=findings, known_tools=sorted(TOOLS), locks=LockAnswers(),
        worker="w1", now=T0,
    )  # fmt: skip
    assert [type(e) for e in events] == [ToolCallRejected, ToolCallValidated]
    assert isinstance(events[0], ToolCallRejected) and events[0].error.code == "unknown_tool"


def test_the_turns_lock_asks_come_in_proposal_order_whoever_asks() -> None:
    log = Log.created()
    do_model_turn(log, use("a"), use("w", "write_file", path="x"), use("v", "write_file", path="x"))
    v = validated(
        log.s, {"a": READ, "w": write("x"), "v": write("x")}, known_tools=sorted(TOOLS), now=T0
    )
    asks = asks_for(v, "v")  # the last call's step asks for the whole turn
    assert [a.call_id for a in asks] == ["w", "v"]
    assert asks[0].keys == {"file:x": Mode.WRITE}
    assert asks[0].request_id == request_id(v, v.call("w"))  # type: ignore[arg-type]


def test_a_granted_call_is_scheduled_and_claimed_and_the_other_recorded_waiting() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="x"), use("v", "write_file", path="x"))
    findings = {"w": write("x"), "v": write("x")}
    v = validated(log.s, findings, known_tools=sorted(TOOLS), now=T0)
    asks = tuple(asks_for(v, "w"))
    grant = Grant(asks[0].request_id, {"file:x": 7}, T0 + 5)
    answers = LockAnswers(asked=asks, grants={grant.id: grant})
    events = drive_call(
        log.s, "w", findings=findings, known_tools=sorted(TOOLS), locks=answers, worker="w1",
        now=T0,
    )  # fmt: skip
    kinds = [type(e) for e in events]
    assert kinds == [ToolCallValidated, ToolCallValidated, ToolCallScheduled, ToolCallWaiting,
                     ToolCallStarted]  # fmt: skip
    log.step(*events)
    assert log.call("w").tokens == {"file:x": 7} and log.call("v").status is C.WAITING


def test_a_waiting_call_asks_again_for_its_own_request() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="x"))
    do_validate(log, "w", writes=["file:x"])
    request = request_id(log.s, log.call("w"))
    log.decide(record_lock, "w", request=request, tokens=None, waiting_for=("file:x",))
    [again] = asks_for(log.s, "w")
    assert again.request_id == request


def test_deciding_again_on_a_state_that_moved_on_adds_nothing() -> None:
    log = Log.created()
    do_model_turn(log, use("a"))
    events = drive_call(
        log.s, "a", findings={"a": READ}, known_tools=sorted(TOOLS), locks=LockAnswers(),
        worker="w1", now=T0,
    )  # fmt: skip
    log.step(*events)
    again = drive_call(
        log.s, "a", findings={"a": READ}, known_tools=sorted(TOOLS), locks=LockAnswers(),
        worker="w2", now=T0,
    )  # fmt: skip
    assert again == []


def _two_writes_holding_locks() -> Log:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="x"), use("v", "write_file", path="y"))
    do_validate(log, "w", writes=["file:x"])
    do_validate(log, "v", writes=["file:y"])
    for call_id in ("w", "v"):
        request = request_id(log.s, log.call(call_id))
        log.decide(record_lock, call_id, request=request, tokens={"k": 1}, lease_until=T0 + 30)
    return log


def test_a_call_that_finishes_releases_its_locks_and_one_still_running_keeps_them() -> None:
    log = _two_writes_holding_locks()
    do_claim(log, "w")
    do_claim(log, "v")
    before = log.s
    do_finish(log, "w", Succeeded(output="ok"))
    assert released_ids(before, log.s) == [before.call("w").lock_request]  # type: ignore[union-attr]
    assert held_requests(log.s) == {log.call("v").lock_request}


def test_a_run_that_stops_releases_what_waits_or_is_granted_at_once() -> None:
    log = _two_writes_holding_locks()
    do_claim(log, "v")  # running: it keeps its lock until it stops
    before = log.s
    do_cancel(log)
    released = released_ids(before, log.s)
    assert before.call("w").lock_request in released  # type: ignore[union-attr]
    assert log.call("v").lock_request not in released


def test_a_run_that_stops_also_releases_an_ask_it_never_recorded() -> None:
    log = Log.created()
    do_model_turn(log, use("w", "write_file", path="x"))
    do_validate(log, "w", writes=["file:x"])  # its worker may have asked, then died
    unrecorded = request_id(log.s, log.call("w"))
    before = log.s
    do_cancel(log)
    assert released_ids(before, log.s) == [unrecorded]


def test_a_write_whose_outcome_is_unknown_keeps_its_locks_until_its_lease_ends() -> None:
    log = _two_writes_holding_locks()
    do_claim(log, "w")
    before = log.s
    do_finish(log, "w", TimedOut(after_s=10.0))
    assert log.call("w").status is C.OUTCOME_UNKNOWN
    assert released_ids(before, log.s) == []
