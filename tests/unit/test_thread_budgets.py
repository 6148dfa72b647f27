"""Each pool of a process has its own thread budget: a pool never runs more
deliveries than its budget, whichever pool they came in through (a delivery
that carries its run on into another pool moves its slot there, or does not
carry on), so the acceptance or tools pool can never take the model pool's
threads. Within the acceptance pool a tenant whose checks run code holds at
most all but one slot, so another tenant's run always finds one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from handlerkit import Unit, call, carrying, new_unit, spec

from agentledger.events.commands import DriveCall, RequestModel, RunAcceptance
from agentledger.services.adapters.broker.budgets import CURRENT, Budgets, Slot, thread_budgets

ALL = ("model", "tools", "accept")
DONE = {"end_turn": "done"}
SLOW_CHECK = {"command": "true"}  # runs code: its tenant's acceptance counts against its share


@pytest.mark.parametrize(
    ("total", "given", "expected"),
    [
        (8, {}, {"model": 3, "tools": 3, "accept": 2}),  # the default worker_threads
        (4, {"accept": 2}, {"model": 1, "tools": 1, "accept": 2}),
        (3, {}, {"model": 1, "tools": 1, "accept": 1}),
        (8, {"model": 10, "tools": 4}, {"model": 10, "tools": 4, "accept": 1}),
        (1, {}, {"model": 1, "tools": 1, "accept": 1}),  # at least one each
    ],
)
def test_each_pool_gets_its_own_share_of_the_workers_threads(
    total: int, given: dict[str, int], expected: dict[str, int]
) -> None:
    assert thread_budgets(total, ALL, given) == expected


def test_a_process_serving_one_pool_gives_it_every_thread() -> None:
    assert thread_budgets(8, ["tools"], {}) == {"tools": 8}
    assert thread_budgets(8, ["model", "accept"], {}) == {"model": 6, "accept": 2}


def test_a_pool_never_runs_more_deliveries_than_its_budget() -> None:
    budgets = Budgets({"accept": 2, "model": 1})
    first, second = budgets.take("accept"), budgets.take("accept")
    assert first is not None and second is not None
    assert budgets.take("accept") is None and budgets.free("model") == 1
    first.release()
    first.release()  # given back once only
    assert budgets.free("accept") == 1 and budgets.take("accept") is not None


def test_a_delivery_moves_its_slot_to_the_pool_it_carries_into_or_keeps_its_own() -> None:
    budgets = Budgets({"model": 1, "accept": 1})
    busy = budgets.take("accept")
    slot = budgets.take("model")
    assert slot is not None and busy is not None
    assert not slot.move("accept") and slot.pool == "model"  # the acceptance pool is full
    busy.release()
    assert slot.move("accept") and slot.pool == "accept"
    assert budgets.free("model") == 1 and budgets.free("accept") == 0


def test_a_tenant_holds_all_but_one_slot_of_a_pool_and_every_slot_of_a_pool_of_one() -> None:
    budgets = Budgets({"accept": 3, "lone": 1})
    a, b, c = (budgets.take("accept") for _ in range(3))
    assert a is not None and b is not None and c is not None
    assert a.name("hostile") and b.name("hostile")
    assert not c.name("hostile") and c.name("other")
    a.release()
    assert c.move("accept", tenant="hostile")  # renamed: the hostile tenant's second again
    lone = budgets.take("lone")
    assert lone is not None and lone.name("hostile")


def test_a_slot_given_back_or_moved_away_wakes_the_pools_consumer() -> None:
    budgets = Budgets({"model": 1, "tools": 1})
    woken = threading.Event()
    budgets.on_free("model", woken)
    slot = budgets.take("model")
    assert slot is not None and not woken.is_set()
    assert slot.move("tools")
    assert woken.is_set()


# --- carrying within the budgets -------------------------------------------------------


@contextmanager
def delivering(slot: Slot) -> Iterator[None]:
    """As the worker thread runs a delivery holding `slot` (`SlotContext`)."""
    token = CURRENT.set(slot)
    try:
        yield
    finally:
        CURRENT.reset(token)


def carried(tmp_path: Path) -> Unit:
    return new_unit(tmp_path / "ws", carry=carrying())


def test_a_delivery_does_not_carry_a_step_into_a_pool_with_no_thread_free(tmp_path: Path) -> None:
    unit = carried(tmp_path)
    unit.create("run-a", spec({"tool_use": [call("c1", "kv_read", key="k")]}, DONE))
    unit.take()
    budgets = Budgets({"model": 1, "tools": 1, "accept": 1})
    taken = budgets.take("tools")  # the tools pool's one thread is busy
    slot = budgets.take("model")
    assert slot is not None and taken is not None

    with delivering(slot):
        unit.deliver(RequestModel("run-a"))

    assert unit.take() == [DriveCall("run-a", "c1")], "the call goes through the tools queue"
    assert slot.pool == "model"


def test_a_delivery_carries_on_while_the_next_pool_has_a_thread_free(tmp_path: Path) -> None:
    unit = carried(tmp_path)
    unit.create("run-a", spec({"tool_use": [call("c1", "kv_read", key="k")]}, DONE))
    unit.take()
    budgets = Budgets({"model": 1, "tools": 1, "accept": 1})
    slot = budgets.take("model")
    assert slot is not None

    with delivering(slot):
        unit.deliver(RequestModel("run-a"))

    assert unit.take() == [] and unit.state("run-a").status.value == "completed"
    assert slot.pool == "accept", "model, then tools, model and accept: one slot all along"
    assert [budgets.free(p) for p in ("model", "tools", "accept")] == [1, 1, 0]


def test_a_tenant_holding_its_share_of_the_acceptance_pool_is_let_go_and_another_is_not(
    tmp_path: Path,
) -> None:
    unit = new_unit(tmp_path / "ws")
    unit.create("run-a", spec(DONE, acceptance=[SLOW_CHECK]))
    unit.drive(until=lambda u: u.state("run-a").status.value == "accepting")
    unit.take()
    budgets = Budgets({"accept": 2})
    running = budgets.take("accept")  # the same tenant's other check runs
    assert running is not None and running.name("unit-tenant")
    slot = budgets.take("accept")
    assert slot is not None

    with delivering(slot):
        unit.deliver(RunAcceptance("run-a"))
    assert unit.state("run-a").status.value == "accepting", (
        "nothing claimed: the sweeper sends it again"
    )
    assert slot.tenant is None

    running.release()
    with delivering(slot):
        unit.deliver(RunAcceptance("run-a"))
    assert unit.state("run-a").status.value == "completed"
