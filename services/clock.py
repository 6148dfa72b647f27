"""The clock and the id makers: the only places that read time or randomness."""

from __future__ import annotations

import os
import time
import uuid
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


def new_run_id() -> str:
    """Sortable by creation time: ms timestamp in hex, then randomness."""
    return f"r-{int(time.time() * 1000):011x}{uuid.uuid4().hex[:8]}"


def new_event_id() -> str:
    return uuid.uuid4().hex


def worker_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"
