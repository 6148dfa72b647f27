"""Child processes that must not outlive the command that started them."""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child, before exec (Linux): SIGTERM when the parent dies, even by SIGKILL.
    Elsewhere nothing: the parent still stops its children when it can."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
