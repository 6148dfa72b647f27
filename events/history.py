"""An append-only sequence that states can share.

Folding a long log must stay linear: each state holds the shared list and its
own length, so appending is O(1) and an older state still sees only its
prefix. Appending to an older state (a branch) copies first."""

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
        items = self._items if len(self._items) == self._n else self._items[: self._n]
        items.append(item)
        return History(items, self._n + 1)

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
