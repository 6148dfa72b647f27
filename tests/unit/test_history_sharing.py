"""History is shared between folded states, and those states between threads
(a process caches them): an append never shows one state another's items."""

from __future__ import annotations

from events.history import History, Pages


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


def test_a_restored_history_reads_its_past_only_when_asked_and_only_once() -> None:
    reads: list[int] = []

    def load() -> list[str]:
        reads.append(1)
        return ["a", "b"]

    restored = History.unread(Pages(2, load))
    later = restored.append("c").append("d")  # a step on the current turn: nothing read
    assert (len(later), reads) == (4, [])
    assert later.extends(restored) and reads == []

    assert list(later) == ["a", "b", "c", "d"] and reads == [1]
    assert list(restored) == ["a", "b"] and later.item(0) == "a" and reads == [1]


def test_a_restored_history_read_newest_first_stops_without_reading_what_it_skips() -> None:
    restored = History.unread(Pages(2, lambda: ["a", "b"])).append("c")
    newest = reversed(restored)
    assert next(newest) == "c"  # the current end: no read of the past yet
