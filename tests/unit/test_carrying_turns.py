"""Fair carrying, the rule (`agentledger.events.carrying`) and the runs in hand of a
process (`agentledger.services.handlers.turns`): a thread hands its turn on once it
has carried a run for the shared slice and another waits; it leaves for a waiting
message only while another thread carries (the runs in hand are never left with
nobody to take them); a stopping process parks nothing; runs in hand go round in
order, each to a thread whose slot can move to its pool."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from agentledger.events.carrying import MAX_LEASE_SHARE, Turn, Waiting, after_run, after_step
from agentledger.services.adapters.broker.budgets import CURRENT, Budgets
from agentledger.services.handlers.turns import Turns


def step(carried_s: float = 0.0, shared_s: float = 0.0, *, stopping: bool = False,
         in_hand: int = 0, messages: int = 0, others: int = 0) -> Turn:  # fmt: skip
    waiting = Waiting(in_hand, messages, others)
    return after_step(carried_s=carried_s, shared_s=shared_s, waiting=waiting, stopping=stopping)


def test_a_thread_carries_on_while_nothing_waits() -> None:
    assert step(carried_s=5.0, others=3) is Turn.GO_ON


def test_a_thread_keeps_its_run_for_the_shared_slice_even_when_others_wait() -> None:
    assert step(carried_s=0.01, shared_s=0.02, in_hand=4, messages=2, others=1) is Turn.GO_ON
    assert step(carried_s=0.02, shared_s=0.02, in_hand=4) is Turn.SWAP


def test_after_the_slice_a_run_in_hand_gets_the_turn() -> None:
    assert step(in_hand=1) is Turn.SWAP


def test_a_waiting_message_gets_the_slot_while_another_thread_carries() -> None:
    assert step(messages=1, others=1) is Turn.LEAVE
    assert step(messages=1, others=1, in_hand=3) is Turn.LEAVE


def test_the_last_carrying_thread_never_leaves_for_a_message() -> None:
    assert step(messages=2, others=0, in_hand=0) is Turn.GO_ON
    assert step(messages=2, others=0, in_hand=2) is Turn.SWAP


def test_a_stopping_process_parks_nothing() -> None:
    assert step(stopping=True, in_hand=3, messages=1, others=2) is Turn.GO_ON


def test_a_thread_whose_run_is_done_takes_a_run_in_hand_unless_another_can() -> None:
    assert after_run(waiting=Waiting(0, 5, 5)) is Turn.DONE
    assert after_run(waiting=Waiting(2, 0, 3)) is Turn.TAKE
    assert after_run(waiting=Waiting(2, 1, 0)) is Turn.TAKE  # the last one: nobody else would
    assert after_run(waiting=Waiting(2, 1, 1)) is Turn.LEAVE
    assert after_run(waiting=Waiting(2, 1, 1), stopping=True) is Turn.TAKE


def test_an_old_delivery_finishes_its_own_run_and_leaves_the_others_to_other_threads() -> None:
    # a message's time limit would stop the thread wherever it is: it stops taking runs first
    assert after_step(carried_s=1.0, shared_s=0.0, waiting=Waiting(3, 0, 1), stopping=False,
                      old=True) is Turn.GO_ON  # fmt: skip
    assert after_run(waiting=Waiting(3, 0, 1), old=True) is Turn.LEAVE
    assert after_run(waiting=Waiting(3, 0, 0), old=True) is Turn.TAKE  # the last one still takes


def test_no_run_joins_the_runs_in_hand_while_the_first_has_waited_too_long() -> None:
    # their claims' leases run while they wait: more go through their queues, unclaimed
    late = Waiting(4, 1, 2, oldest_share=MAX_LEASE_SHARE)
    assert not late.room
    assert after_step(carried_s=0.0, shared_s=0.0, waiting=late, stopping=False) is Turn.SWAP
    assert Waiting(4, 1, 2, oldest_share=MAX_LEASE_SHARE / 2).room


def test_a_run_in_hand_that_waited_half_its_lease_leaves_no_room() -> None:
    turns: Turns[Run] = Turns(shared_s=0.0)
    assert turns.room()
    turns._park(Run("short", lease_s=0.0))  # no lease left
    assert not turns.room()


def test_a_negative_count_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="negative count"):
        Waiting(-1, 0, 0)


@dataclass(frozen=True)
class Run:
    name: str
    pool: str = "model"
    lease_s: float = 60.0


def in_thread(budgets: Budgets, pool: str, body: object) -> None:
    """Run `body(turns carrier)` on a thread holding a slot of `pool`, as a delivery does."""
    done: list[BaseException] = []

    def run() -> None:
        slot = budgets.take(pool)
        assert slot is not None
        CURRENT.set(slot)
        try:
            body()  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            done.append(exc)
        finally:
            slot.release()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    if done:
        raise done[0]


def test_runs_in_hand_go_round_in_order() -> None:
    budgets = Budgets({"model": 2, "tools": 2})
    turns: Turns[Run] = Turns(shared_s=0.0, messages=budgets.waiting)
    seen: list[str] = []

    def body() -> None:
        with turns.carrier() as me:
            turns._park(Run("b"))
            turns._park(Run("c"))
            mine: Run | None = Run("a")
            while mine is not None and len(seen) < 6:
                seen.append(mine.name)
                mine = me.next_turn(mine, carried_s=0.0, stopping=False)

    in_thread(budgets, "model", body)
    assert seen == ["a", "b", "c", "a", "b", "c"]


def test_a_run_in_hand_goes_to_a_thread_that_can_move_to_its_pool() -> None:
    budgets = Budgets({"model": 1, "tools": 1})
    turns: Turns[Run] = Turns(shared_s=0.0, messages=budgets.waiting)
    blocker = budgets.take("tools")  # the tools pool is full: its runs wait
    got: list[Run | None] = []

    def body() -> None:
        with turns.carrier() as me:
            turns._park(Run("t", "tools"))
            turns._park(Run("m"))
            got.append(me.next_run(stopping=False))
            got.append(me.next_run(stopping=False))

    in_thread(budgets, "model", body)
    assert got == [Run("m"), None]
    assert turns.in_hand() == 1 and turns.carriers() == 0  # left, counted out once
    assert blocker is not None


def test_a_thread_that_leaves_for_a_message_parks_its_run_for_the_others() -> None:
    budgets = Budgets({"model": 2, "tools": 2})
    turns: Turns[Run] = Turns(shared_s=0.0, messages=budgets.waiting)
    budgets.wait("model", 1)
    other_in = threading.Event()
    release = threading.Event()
    after: list[Run | None] = []

    def other() -> None:
        with turns.carrier():
            other_in.set()
            release.wait(30)

    helper = threading.Thread(target=other)
    helper.start()
    other_in.wait(30)

    def body() -> None:
        with turns.carrier() as me:
            after.append(me.next_turn(Run("a"), carried_s=1.0, stopping=False))

    in_thread(budgets, "model", body)
    release.set()
    helper.join(timeout=30)
    assert after == [None] and turns.in_hand() == 1 and turns.carriers() == 0
