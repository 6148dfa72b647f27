"""An append-only sequence that states can share.

Folding a long log must stay linear: each state holds the shared list and its
own length, so appending is O(1) and an older state still sees only its
prefix. Appending to an older state (a branch) copies first. States are shared
between threads (a process caches folded states), so two appends racing for
the same slot are settled after the fact: the one whose item did not land
there copies.

A history restored from a snapshot may start with items not read yet (`Pages`):
their places are held, and the first read of any of them reads them all, once,
for every state that shares the list. Counting, appending and `extends` never
read them, so a step on the current turn costs nothing for a long past."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class _Unread:
    __slots__ = ()


UNREAD = _Unread()


class Pages(Generic[T]):
    """The first `count` items of a history, read on first need by `load` (supplied
    by whoever restored the history: the pure core only calls it)."""

    __slots__ = ("count", "_load", "done")

    def __init__(self, count: int, load: Callable[[], list[T]]):
        self.count = count
        self._load = load
        self.done = False

    def fill(self, items: list[T | _Unread]) -> None:
        """Read the items into their places. Two threads reading at once both write the
        same items (one slice assignment, atomic under the GIL): no lock is needed."""
        if self.done:
            return
        loaded = self._load()
        if len(loaded) != self.count:
            raise ValueError(f"read {len(loaded)} items of a history of {self.count}")
        items[: self.count] = loaded
        self.done = True


class History(Generic[T]):
    __slots__ = ("_items", "_n", "_pages")

    def __init__(
        self, items: list[T] | None = None, n: int | None = None, pages: Pages[T] | None = None
    ):
        self._items: list[T] = items if items is not None else []
        self._n = len(self._items) if n is None else n
        self._pages = pages

    @classmethod
    def unread(cls, pages: Pages[T]) -> History[T]:
        """A history of `pages.count` items not read yet."""
        return cls([UNREAD] * pages.count, pages.count, pages)  # type: ignore[list-item]

    def _read(self) -> list[T]:
        pages = self._pages
        if pages is not None and not pages.done:
            pages.fill(self._items)  # type: ignore[arg-type]
        return self._items

    def append(self, item: T) -> History[T]:
        items, n = self._items, self._n
        if len(items) == n:
            items.append(item)  # atomic; an item once in the list never changes
            if items[n] is item:
                return History(items, n + 1, self._pages)
        return History([*self._read()[:n], item], n + 1)

    def extends(self, other: History[T]) -> bool:
        """Whether `other` is a prefix of this sequence (the same shared items): O(1)."""
        return other._items is self._items and other._n <= self._n

    def item(self, i: int) -> T:
        """One item, without copying the prefix (0 <= i < len)."""
        if not 0 <= i < self._n:
            raise IndexError(i)
        items = self._items
        return self._read()[i] if items[i] is UNREAD else items[i]

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[T]:
        return iter(self._read()[: self._n])

    def __reversed__(self) -> Iterator[T]:
        n = self._n
        return (self.item(i) for i in range(n - 1, -1, -1))

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        return self._read()[: self._n][i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, History) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"History({list(self)!r})"
