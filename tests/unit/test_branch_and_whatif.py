"""Branches and what-if, the pure parts (issue 39): a branch's turns before its own
are its origin's (the recorded replies, the recorded outcomes, no approval asked
again); a what-if compares two runs call by call with each one's workspace path
read as one, says where the branch departed, which calls differ and how, and which
checks flip."""

from __future__ import annotations

from typing import Any

from runlog import Log, do_model_turn, do_validate, use

from agentledger.events.acceptance_events import AcceptanceChecked, AcceptanceStarted
from agentledger.events.branching import model_at, recorded_outcome, taken_from_origin
from agentledger.events.call_events import ToolCallFailed, ToolCallProposed, ToolCallSucceeded
from agentledger.events.event_model import ToolError
from agentledger.events.run_events import RunCreated
from agentledger.events.status import RunStatus
from agentledger.events.tool_step import Errored, Succeeded
from agentledger.events.whatif import compare, departed, flipped, steps
from agentledger.schemas.spec import Branch, ReplayModel
from tests.unit.runlog import make_spec

ORIGIN = "r-origin"


def test_a_branchs_turns_before_its_own_are_answered_by_the_origins_replies() -> None:
    spec = make_spec().model_copy(update={"branch": Branch(run_id=ORIGIN, turn=3)})
    assert taken_from_origin(spec, 2) and not taken_from_origin(spec, 3)
    replayed = model_at(spec, 2)
    assert isinstance(replayed, ReplayModel) and replayed.replay.run_id == ORIGIN
    assert model_at(spec, 3) is spec.model
    plain = make_spec()
    assert model_at(plain, 1) is plain.model and not taken_from_origin(plain, 1)


def test_a_recorded_outcome_is_the_origins_last_and_never_run_again() -> None:
    ok = ToolCallSucceeded(call_id="c", output={"n": 1}, started_at=0, finished_at=1)
    bad = ToolCallFailed(
        call_id="d", error=ToolError(code="not_found", message="x", retryable=False), finished_at=1
    )
    assert recorded_outcome([ok, bad], ORIGIN, "c") == Succeeded({"n": 1}, replay_of="r-origin/c")
    failed = recorded_outcome([ok, bad], ORIGIN, "d")
    assert isinstance(failed, Errored) and failed.error.code == "not_found"
    missing = recorded_outcome([ok], ORIGIN, "zz")
    assert isinstance(missing, Errored) and "recorded no outcome" in missing.error.message


def test_a_call_taken_from_the_origin_asks_no_approval_again() -> None:
    spec = make_spec(max_turns=3).model_copy(update={"branch": Branch(run_id=ORIGIN, turn=2)})
    log = Log.created(spec)
    do_model_turn(log, use("w", "write_file", path="/etc/hosts"))
    do_validate(log, "w", needs_approval="a person must say yes")
    assert log.s.status is not RunStatus.AWAITING_APPROVAL
    assert [e.type for e in log.envelopes][-1] == "ToolCallValidated"


def _log(ws: str, output: Any, *, passed: bool | None = True) -> list[object]:
    log: list[object] = [RunCreated(spec=make_spec(), workspace=ws)]
    for turn, (cid, out) in enumerate((("a", f"{ws}/x.txt"), ("b", output)), start=1):
        log.append(ToolCallProposed(call_id=cid, turn=turn, name="t", input={"p": f"{ws}/x"}))
        log.append(ToolCallSucceeded(call_id=cid, output=out, started_at=0, finished_at=1))
    if passed is not None:
        log.append(AcceptanceStarted(attempt=1, deadline_at=9))
        log.append(AcceptanceChecked(index=0, check="c", passed=passed, evidence={}, checked_at=9))
    return log


def test_two_runs_in_different_folders_with_the_same_calls_do_not_differ() -> None:
    a, b = _log("/ws/one", "v1"), _log("/ws/two", "v1")
    assert departed(a, b) is None
    assert compare(steps(a), steps(b), ({}, {}), since_turn=1) == []
    assert flipped(steps(a), steps(b)) == []


def test_another_output_is_the_departure_and_its_check_flips() -> None:
    a, b = _log("/ws/one", "v1"), _log("/ws/two", "v2", passed=False)
    gone = departed(a, b)
    assert gone is not None and (gone.key, gone.turn) == ("b", 2)
    (d,) = compare(steps(a), steps(b), ({}, {}), since_turn=1)
    assert (d.key, d.what, d.origin, d.branch) == (
        "b",
        ("outcome",),
        't({"p": "<workspace>/x"}) -> ok "v1"',
        't({"p": "<workspace>/x"}) -> ok "v2"',
    )
    assert flipped(steps(a), steps(b)) == [("check-1.1", "c", "passed", "failed")]


def test_a_write_that_changed_other_files_differs_by_its_files() -> None:
    a, b = _log("/ws/one", "v1"), _log("/ws/two", "v1")
    files = ({"b": (("f", "modified", "sha256:1"),)}, {"b": (("f", "modified", "sha256:2"),)})
    (d,) = compare(steps(a), steps(b), files, since_turn=2)
    assert (d.key, d.what, d.files) == ("b", ("files",), ("f",))
    assert compare(steps(a), steps(b), files, since_turn=3) == []  # before the branch: not its


def test_calls_the_branch_never_made_are_named_and_its_checks_not_run() -> None:
    a, b = _log("/ws/one", "v1"), _log("/ws/two", "v1", passed=None)[:3]
    (d,) = compare(steps(a), steps(b), ({}, {}), since_turn=1)
    assert (d.key, d.what) == ("b", ("only in the origin",))
    assert flipped(steps(a), steps(b)) == [("check-1.1", "c", "passed", "not run")]
