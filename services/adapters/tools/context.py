"""What a running tool gets besides its arguments: the run's ids and workspace,
a cancel flag to poll, and `run()` for subprocesses, which the executor can
SIGTERM and then SIGKILL when the run is cancelled."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from events.types import ErrorCode


class ToolFailure(Exception):
    """Raised by a tool to report a failure the model can act on."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ):
        self.code = code
        self.message = message
        self.retryable = retryable or retry_after_s is not None
        self.retry_after_s = retry_after_s
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True)
class Lookup:
    """What a tool's `lookup(op_key, args, ctx)` found about a write: done (with its
    result), surely not done, or None when it cannot tell."""

    done: bool | None
    result: Any = None


class ToolCancelled(Exception):
    """Raised by a tool that stopped because `ctx.cancelled` was set."""


@dataclass(frozen=True)
class ToolContext:
    run_id: str
    call_id: str
    workspace: str | None
    principal_id: str
    tenant: str
    cancelled: threading.Event = field(default_factory=threading.Event)
    tokens: dict[str, int] = field(default_factory=dict)  # fencing token per locked resource
    op_key: str | None = None  # a write's operation key: pass it on so the service can dedupe
    outputs: Callable[[str], Any] | None = None  # a call id of this run -> its full output
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise ToolCancelled(self.call_id)

    def run(
        self, args: list[str], *, timeout_s: float | None = None, **popen: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in its own process group; the executor may signal it."""
        popen.setdefault("cwd", self.workspace)
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            **popen,
        )
        self.processes.append(proc)
        out, err = proc.communicate(timeout=timeout_s)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    def signal_processes(self, sig: signal.Signals) -> int:
        """Send `sig` to every live process group the tool started; how many got it."""
        sent = 0
        for proc in self.processes:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                    sent += 1
                except ProcessLookupError:
                    pass  # it ended between poll and kill
        return sent
