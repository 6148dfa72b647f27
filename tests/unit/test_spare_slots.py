"""A pool's spare slot (`Budgets(spares=...)`): taken only once the budget's slots
are, one at most; given back like any slot; never reached by a slot moving in from
another pool (carrying on), so only the pool's consumer hands it out."""

from __future__ import annotations

from agentledger.services.adapters.broker.budgets import Budgets


def test_the_spare_is_taken_only_past_the_budget_and_only_once() -> None:
    budgets = Budgets({"model": 2, "tools": 1}, spares={"model": 1})
    assert budgets.spare("model") == 1 and budgets.spare("tools") == 0
    held = [budgets.take("model"), budgets.take("model")]
    assert all(held) and budgets.take("model") is None

    spare = budgets.take_spare("model")

    assert spare is not None and budgets.take_spare("model") is None
    assert budgets.free("model") == 0
    spare.release()
    assert budgets.take_spare("model") is not None


def test_a_slot_moving_in_from_another_pool_never_takes_the_spare() -> None:
    budgets = Budgets({"model": 1, "tools": 1}, spares={"model": 1})
    assert budgets.take("model") is not None
    carried = budgets.take("tools")
    assert carried is not None

    assert not carried.move("model"), "the budget is full; the spare is the consumer's"
    assert carried.pool == "tools"
