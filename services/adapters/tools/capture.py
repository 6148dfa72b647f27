"""Output kept per tool call, bounded: what a Python tool prints (its own
`print` lines and anything else written to `sys.stdout`/`sys.stderr` from its
thread) and what a command writes to its pipes. None of it reaches the
worker's own output; it is recorded on the call's outcome event instead.

`sys.stdout` and `sys.stderr` are replaced once by a stream that sends each
write to the capture of the thread that made it, or to the real stream for a
thread nobody captures. Threads a tool starts itself are not followed."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

KEEP_CHARS = 8000  # per stream and call, half from the start and half from the end


class Bounded:
    """Text of any length, keeping the first and the last `cap // 2` characters."""

    def __init__(self, cap: int = KEEP_CHARS):
        self._half = cap // 2
        self._rest = cap - self._half
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total = 0
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        with self._lock:
            self.total += len(s)
            room = self._half - self._head_len
            if room > 0:
                self._head.append(s[:room])
                self._head_len += len(s[:room])
                s = s[room:]
            if s:
                self._tail = (self._tail + s)[-self._rest :]
        return len(s)

    @property
    def dropped(self) -> int:
        return self.total - self._head_len - len(self._tail)

    def text(self) -> str:
        with self._lock:
            head = "".join(self._head)
            if self.dropped <= 0:
                return head + self._tail
            return f"{head}\n[... {self.dropped:,} characters left out ...]\n{self._tail}"


@dataclass
class Captured:
    stdout: Bounded = field(default_factory=Bounded)
    stderr: Bounded = field(default_factory=Bounded)


class _PerThread:
    """Stands in for sys.stdout or sys.stderr; writes go to the calling thread's
    capture. Everything else (encoding, fileno, isatty…) is the real stream's."""

    def __init__(self, real: Any, which: str):
        self.real = real
        self._which = which

    def write(self, s: str) -> int:
        target = _captures.get(threading.get_ident())
        if target is None:
            written = self.real.write(s)
            return written if isinstance(written, int) else len(s)
        getattr(target, self._which).write(s)
        return len(s)

    def flush(self) -> None:
        if threading.get_ident() not in _captures:
            self.real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


_captures: dict[int, Captured] = {}
_install_lock = threading.Lock()


def _install() -> None:
    with _install_lock:
        for which in ("stdout", "stderr"):
            current = getattr(sys, which)
            if not isinstance(current, _PerThread):
                setattr(sys, which, _PerThread(current, which))


@contextlib.contextmanager
def capturing() -> Iterator[Captured]:
    """Capture what the current thread writes to sys.stdout and sys.stderr."""
    _install()
    me = threading.get_ident()
    captured = Captured()
    _captures[me] = captured
    try:
        yield captured
    finally:
        _captures.pop(me, None)
