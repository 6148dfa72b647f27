"""Memos: what a pure function gave for an input, kept so that the next call with
the same input costs nothing — a speed device beside the rules, never the truth
(a miss only means computing again). Both kinds are bounded, oldest kept first
out, and take no lock: threads racing over one may blur its bounds or drop an
entry, never give a wrong value.

`Memo` is keyed by value (a run id). `IdentityMemo` is keyed by an object's
identity and a value (a frozen turn, the same object from one state of its run
to the next, and a redactor): each entry holds its object, so the id is not
reused while the entry is kept, and is bounded by the size of its values too."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
O = TypeVar("O")  # noqa: E741
V = TypeVar("V")
_RACES = (KeyError, RuntimeError, StopIteration)  # another thread changed the dict meanwhile


class Memo(Generic[K, V]):
    def __init__(self, most: int):
        self.most = most
        self._kept: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self._kept.get(key)

    def put(self, key: K, value: V) -> None:
        kept = self._kept
        kept.pop(key, None)  # re-inserted last: the oldest entry is the least recently kept
        if len(kept) >= self.most:
            try:
                del kept[next(iter(kept))]
            except _RACES:
                pass
        kept[key] = value

    def pop(self, key: K) -> None:
        self._kept.pop(key, None)

    def clear(self) -> None:
        self._kept.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._kept


class IdentityMemo(Generic[O, V]):
    def __init__(self, most: int, most_size: int):
        self.most = most
        self.most_size = most_size
        self.size = 0  # of the values kept (about: threads may blur it)
        self._kept: dict[tuple[int, Hashable], tuple[O, V, int]] = {}

    def get(self, obj: O, extra: Hashable) -> V | None:
        hit = self._kept.get((id(obj), extra))
        return hit[1] if hit is not None and hit[0] is obj else None

    def put(self, obj: O, extra: Hashable, value: V, size: int) -> None:
        kept, key = self._kept, (id(obj), extra)
        old = kept.pop(key, None)
        total = self.size - (old[2] if old is not None else 0) + size
        while kept and (len(kept) >= self.most or total > self.most_size):
            try:
                total -= kept.pop(next(iter(kept)))[2]
            except _RACES:
                break
        kept[key] = (obj, value, size)
        self.size = max(total, size)

    def clear(self) -> None:
        self._kept.clear()
        self.size = 0

    def __len__(self) -> int:
        return len(self._kept)

    def values(self) -> Iterator[V]:
        return (v for _, v, _ in list(self._kept.values()))
