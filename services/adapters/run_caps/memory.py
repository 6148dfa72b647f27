"""The lines in this process's memory, for unit tests: the pure rule itself."""

from __future__ import annotations

import threading

from agentledger.events.run_caps import Line, admit, finish


class MemoryRunLines:
    def __init__(self) -> None:
        self._lines: dict[tuple[str, str], Line] = {}
        self._mutex = threading.Lock()

    def admit(self, queue: str, tenant: str, run_id: str, most: int) -> int:
        with self._mutex:
            line, place = admit(self._lines.get((queue, tenant), Line()), run_id, most)
            self._lines[(queue, tenant)] = line
            return place

    def finish(self, queue: str, tenant: str, run_id: str, most: int) -> list[str]:
        with self._mutex:
            line, released = finish(self._lines.get((queue, tenant), Line()), run_id, most)
            self._lines[(queue, tenant)] = line
            return list(released)

    def look(self, queue: str, tenant: str) -> Line:
        with self._mutex:
            return self._lines.get((queue, tenant), Line())

    def first_held(self, limit: int) -> list[str]:
        with self._mutex:
            return [line.held[0] for line in self._lines.values() if line.held][:limit]
