"""What a running tool gets besides its arguments: the run's ids and workspace,
a cancel flag to poll, and `run()` for subprocesses, which the executor can
SIGTERM and then SIGKILL when the run is cancelled."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

from events.types import ErrorCode


class ToolFailure(Exception):
    """Raised by a tool to report a failure the model can act on."""

    def __init__(self, code: ErrorCode, message: str, *, retryable: bool = False):
        self.code = code
        self.message = message
        self.retryable = retryable
        super().__init__(f"{code}: {message}")


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
