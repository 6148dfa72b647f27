"""How the CLI stops when asked. SIGINT and SIGTERM both mean "interrupted":
a command stops where it is and exits 130, with no traceback. Inside
`graceful()` (what `run` does while it follows its run) the first signal only
sets a flag, so the command can ask its run to cancel and wait for it; the
second stops at once. Inside `shielded()` (stopping embedded workers, so
they finish what they hold) signals are noted and a further one quits."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install() -> None:
    """Every signal of SIGNALS raises Interrupted in the main thread."""
    for sig in SIGNALS:
        signal.signal(sig, _raise)


@contextmanager
def graceful() -> Iterator[threading.Event]:
    """Inside, the first signal sets the event it yields; the next one raises Interrupted."""
    asked = threading.Event()

    def first_then_raise(signum: int, _frame: FrameType | None) -> None:
        if asked.is_set():
            raise Interrupted(signum)
        asked.set()

    previous = {sig: signal.signal(sig, first_then_raise) for sig in SIGNALS}
    try:
        yield asked
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def shielded(what: str) -> Iterator[None]:
    """Inside, a signal says what is going on; a second one quits the process (130)."""
    seen: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        if seen:
            os._exit(130)  # asked three times: the user means it
        seen.append(signum)
        print(f"agentledger: {what}; once more to quit at once", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, note) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
