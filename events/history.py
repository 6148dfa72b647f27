"""An append-only sequence that states can share.

Folding a long log must stay linear: each state holds the shared list and its
own length, so appending is O(1) and an older state still sees only its
prefix. Appending to an older state (a branch) copies first. States are shared
between threads (a process caches folded states), so two appends racing for
the same slot are settled after the fact: the one whose item did not land
there copies.

A history is data: a state restored from a snapshot holds its past turns read
already (the shell reads a snapshot's pages before anything decides on it), so
nothing here ever reads anything."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class History(Generic[T]):
    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T] | None = None, n: int | None = None):
        self._items: list[T] = items if items is not None else []
        self._n = len(self._items) if n is None else n

    def append(self, item: T) -> History[T]:
        items, n = self._items, self._n
        if len(items) == n:
            items.append(item)  # atomic; an item once in the list never changes
            if items[n] is item:
                return History(items, n + 1)
        return History([*items[:n], item], n + 1)

    def extends(self, other: History[T]) -> bool:
        """Whether `other` is a prefix of this sequence (the same shared items): O(1)."""
        return other._items is self._items and other._n <= self._n

    def item(self, i: int) -> T:
        """One item, without copying the prefix (0 <= i < len)."""
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._items[i]

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[T]:
        return iter(self._items[: self._n])

    def __reversed__(self) -> Iterator[T]:
        items = self._items
        return (items[i] for i in range(self._n - 1, -1, -1))

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        return self._items[: self._n][i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, History) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"History({list(self)!r})"
