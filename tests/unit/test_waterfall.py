"""The web view's picture of a run (`agentledger.events.waterfall`): lanes that
never hold two overlapping bars, a tool call's bar cut into its approval, lock
wait and run, each model request's tokens and cost, acceptance on its own lane."""

from __future__ import annotations

from journeys import acceptance_retried_then_failed, approvals_granted_denied_and_expired
from runlog import (
    T0,
    Log,
    check,
    do_accept,
    do_claim,
    do_finish,
    do_model_turn,
    do_validate,
    text,
    use,
)

from agentledger.events.lock_step import record_lock, request_id
from agentledger.events.tool_step import Succeeded
from agentledger.events.waterfall import BarKind, Waterfall, assign_lanes, waterfall
from agentledger.schemas.content import Usage


def test_overlapping_intervals_take_a_lane_each_and_a_later_one_reuses_the_first_free() -> None:
    assert assign_lanes([(0, 3), (0.1, 2), (0.2, 1), (1, 4), (3, 5)]) == [0, 1, 2, 2, 0]


def test_an_interval_that_starts_where_another_ends_shares_its_lane() -> None:
    assert assign_lanes([(0, 1), (1, 2), (2, 3)]) == [0, 0, 0]


def test_an_open_interval_keeps_its_lane_for_good() -> None:
    assert assign_lanes([(0, None), (5, 6), (7, 8)]) == [0, 1, 1]


def test_lanes_follow_the_start_times_not_the_order_given() -> None:
    assert assign_lanes([(2, 3), (0, 1)]) == [0, 0]
    assert assign_lanes([(1, 3), (0, 2)]) == [1, 0]


def parallel_reads_and_a_waiting_write() -> Log:
    """Three reads of a, b, c at once and a write of a that waits for a's read lock."""
    log = Log.created()
    do_model_turn(log, use("r1", path="a"), use("r2", path="b"), use("r3", path="c"),
                  use("w1", "write_file", path="a"), now=T0)  # fmt: skip
    for call_id in ("r1", "r2", "r3"):
        do_validate(log, call_id, reads=[f"file:{log.call(call_id).input['path']}"], now=T0 + 1)
    do_validate(log, "w1", writes=["file:a"], now=T0 + 1)

    def lock(call_id: str, granted: bool, at: float) -> None:
        request = request_id(log.s, log.call(call_id))
        tokens = {f"file:{log.call(call_id).input['path']}": 1} if granted else None
        log.at(at)
        log.decide(record_lock, call_id, request=request, tokens=tokens, lease_until=at + 30,
                   waiting_for=() if granted else ("file:a",))  # fmt: skip

    for call_id in ("r1", "r2", "r3"):
        lock(call_id, True, T0 + 2)
    lock("w1", False, T0 + 2)
    for n, call_id in enumerate(("r1", "r2", "r3")):
        do_claim(log, call_id, now=T0 + 3 + n * 0.1)
    for n, call_id in enumerate(("r1", "r2", "r3")):
        do_finish(log, call_id, Succeeded(output="x"), now=T0 + 3 + n * 0.1)
    lock("w1", True, T0 + 4)
    do_claim(log, "w1", now=T0 + 5)
    do_finish(log, "w1", Succeeded(output="ok"), now=T0 + 5)
    do_model_turn(log, text("done"), now=T0 + 7)
    do_accept(log, check(True), now=T0 + 8)
    return log


def picture(log: Log) -> Waterfall:
    found = waterfall(log.envelopes)
    assert found is not None
    return found


def test_three_reads_run_on_three_lanes_at_once_and_the_write_waits_for_its_lock() -> None:
    w = picture(parallel_reads_and_a_waiting_write())
    calls = {b.call_id: b for b in w.bars if b.kind is BarKind.TOOL}
    reads = [calls[c] for c in ("r1", "r2", "r3")]
    assert len({b.lane for b in reads}) == 3
    runs = [next(s for s in b.segments if s.phase == "running") for b in reads]
    assert max(s.start for s in runs) < min(s.end or 0 for s in runs)  # all three at once
    wait, run = calls["w1"].segments
    assert (wait.phase, wait.waiting_for, wait.start, wait.end) == (
        "lock_wait",
        ("file:a",),
        T0 + 2,
        T0 + 4,
    )
    assert run.phase == "running" and run.start >= runs[0].end  # type: ignore[operator]
    assert w.lanes[0] == "model" and w.lanes[-1] == "acceptance"
    assert len(w.lanes) == 2 + len({b.lane for b in calls.values()})


def test_each_bar_names_the_log_entries_it_stands_for_and_every_entry_of_a_call_is_on_its_bar() -> (
    None
):
    log = parallel_reads_and_a_waiting_write()
    w = picture(log)
    by_call = {b.call_id: set(b.seqs) for b in w.bars if b.kind is BarKind.TOOL}
    for env in log.envelopes:
        call_id = getattr(env.data, "call_id", None)
        if call_id is not None:
            assert env.seq in by_call[call_id], env.type


def test_a_model_bar_carries_its_tokens_and_the_cost_the_run_counts() -> None:
    log = Log.created()
    usage = Usage(input_tokens=1000, output_tokens=200, cache_read_input_tokens=3000)
    do_model_turn(log, text("done"), usage=usage, model="claude-opus-5-5")
    w = picture(log)
    (bar,) = [b for b in w.bars if b.kind is BarKind.MODEL]
    assert (bar.input_tokens, bar.output_tokens) == (4000, 200)  # cached reads are input too
    assert bar.turn == 1 and bar.cost_usd > 0
    assert w.cost_usd == bar.cost_usd == round(log.s.cost_usd, 6)


def test_an_approval_is_its_own_segment_and_a_denied_call_ends_with_its_error() -> None:
    w = picture(approvals_granted_denied_and_expired())
    calls = {b.call_id: b for b in w.bars if b.kind is BarKind.TOOL}
    assert [s.phase for s in calls["a"].segments] == ["approval", "running"]
    assert calls["b"].error == "denied by bob"
    assert [s.phase for s in calls["b"].segments] == ["approval"]


def test_each_acceptance_pass_is_a_bar_on_the_acceptance_lane_and_a_failed_one_says_so() -> None:
    w = picture(acceptance_retried_then_failed())
    passes = [b for b in w.bars if b.kind is BarKind.ACCEPTANCE]
    assert [b.label for b in passes] == ["acceptance 1", "acceptance 2"]
    assert {b.lane for b in passes} == {len(w.lanes) - 1}
    assert all(b.error is not None for b in passes)


def test_a_live_run_has_open_bars_and_no_end() -> None:
    log = Log.created()
    do_model_turn(log, use("r1", path="a"))
    w = picture(log)
    assert w.end is None
    assert [b.end for b in w.bars if b.kind is BarKind.TOOL] == [None]


def test_an_empty_log_is_no_picture() -> None:
    assert waterfall([]) is None
