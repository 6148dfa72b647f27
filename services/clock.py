"""The clock and the id makers: the only places that read time or randomness."""

from __future__ import annotations

import itertools
import os
import socket
import time
import uuid
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


MAX_SHARDS = 4096  # AGENTLEDGER_SHARDS is at most this
# the longest id `new_run_id` makes (shard 4095): a column of run ids is this wide
RUN_ID_WIDTH = len(f"r-{0:011x}{0:08x}.s{MAX_SHARDS - 1}")


def new_run_id(shard: int) -> str:
    """Sortable by creation time (ms timestamp in hex, then randomness), and carrying
    its shard, so the keys of the run never depend on how many shards there are."""
    return f"r-{int(time.time() * 1000):011x}{uuid.uuid4().hex[:8]}.s{shard}"


def new_event_id() -> str:
    """32 hex digits, unique without a syscall each: 64 random bits drawn once per
    process (again in a forked child), then a counter."""
    return f"{_ID_BASE}{next(_ID_COUNT):016x}"


def _draw_id_base() -> None:
    global _ID_BASE
    _ID_BASE = uuid.uuid4().hex[:16]


_ID_BASE = ""
_draw_id_base()
os.register_at_fork(after_in_child=_draw_id_base)
_ID_COUNT = itertools.count(int.from_bytes(os.urandom(4)))


def worker_name() -> str:
    """Host, process and a random part: a restarted process with a reused pid, or a
    container whose hostname repeats, is never taken for the one before it."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
