"""History is shared between folded states, and those states between threads
(a process caches them): an append never shows one state another's items."""

from __future__ import annotations

from agentledger.events.history import History


class _LosesTheRace(list[object]):
    """A list into which another thread appends just before us."""

    def append(self, item: object) -> None:
        super().append("another thread's item")
        super().append(item)


def test_appending_to_the_newest_state_shares_the_list() -> None:
    first = History(["a"])

    second = first.append("b")

    assert list(second) == ["a", "b"] and list(first) == ["a"]
    assert second._items is first._items


def test_appending_to_an_older_state_branches_without_touching_the_newer_one() -> None:
    older = History(["a"])
    newer = older.append("b")

    branch = older.append("c")

    assert (list(newer), list(branch)) == (["a", "b"], ["a", "c"])


def test_an_append_that_loses_the_race_for_its_slot_copies_instead() -> None:
    state = History(_LosesTheRace(["a"]))

    mine = state.append("b")

    assert list(mine) == ["a", "b"]


def test_a_history_read_newest_first_sees_only_its_own_prefix() -> None:
    older = History(["a", "b"])
    older.append("c")
    assert list(reversed(older)) == ["b", "a"]
