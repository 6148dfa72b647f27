"""How a worker process's memory is handed out by the C allocator. glibc gives
each thread that meets contention an arena of its own (up to 8 per core) and
returns little of them to the system: a worker's eight pool threads, each
allocating and freeing a run's events, left RSS a quarter above what was live.
Two arenas are enough for threads that hold the GIL for most of their work.
Set before the pools' threads start; `MALLOC_ARENA_MAX` in the environment
(glibc's own variable) wins, and 0 leaves glibc's default."""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # glibc's malloc.h


def limit_arenas(arenas: int) -> bool:
    """Whether the allocator now makes at most `arenas` arenas (False: not glibc,
    left to the environment, or 0)."""
    if arenas <= 0 or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library with mallopt: nothing to do
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
