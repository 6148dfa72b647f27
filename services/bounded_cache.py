"""A least-recently-used cache bounded by count and by bytes (each entry's size as
its owner reckons it), safe across threads: the process's caches of specs and
model adapters, which a long-lived worker would otherwise grow without end. The
entry used last stays whatever it costs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedCache(Generic[V]):
    def __init__(self, *, max_items: int, max_bytes: int):
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._kept: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        found = self._kept.get(key)  # a lookup needs no lock (the dict's own are atomic)
        if found is None:
            return None
        try:
            last = next(reversed(self._kept), None)  # the entry used last is asked again, mostly
        except RuntimeError:  # another thread changed the order meanwhile
            last = None
        if last != key:
            with self._lock:
                if key in self._kept:
                    self._kept.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value: V, size: int) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            self._bytes += size - (old[1] if old is not None else 0)
            self._kept[key] = (value, size)
            while len(self._kept) > 1 and (
                len(self._kept) > self.max_items or self._bytes > self.max_bytes
            ):
                _, (_, dropped) = self._kept.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def bytes(self) -> int:
        return self._bytes
