"""What a running tool gets besides its arguments: the run's ids and workspace,
a cancel flag to poll, and `run()` for subprocesses, which run in the sandbox
(`sandbox.py`) and which the executor can SIGTERM and then SIGKILL when the run
is cancelled."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentledger.events.types import ErrorCode
from agentledger.services.adapters.tools.process import Completed, Process, run_command
from agentledger.services.adapters.tools.sandbox import SandboxPolicy, SandboxUnavailable


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
    # a call id of this run, a window (start, end) -> those characters of its output's
    # text and the text's length (overflow pages read as far as the window needs)
    output_window: Callable[[str, int, int], tuple[str, int] | None] | None = None
    processes: list[Process] = field(default_factory=list)
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)  # the operator's choice
    network: bool = False  # the tool declared it needs the network (`@tool(network=True)`)
    read_only: bool = False  # a read-only tool: its commands see the workspace read-only

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise ToolCancelled(self.call_id)

    def run(
        self,
        args: Sequence[str],
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> Completed:
        """Run a command in the sandbox, in the workspace (or `cwd`, a folder of
        it; read-only for a read-only tool), with a minimal environment plus `env`. Returns its exit code and its
        output (each stream bounded); `.limit` names the sandbox limit that stopped
        it, if one did. Raises subprocess.TimeoutExpired after `timeout_s` (the
        command is killed first); ToolFailure when it cannot be sandboxed here;
        ToolCancelled once the call was asked to stop."""
        if isinstance(args, str) or not args or not all(isinstance(a, str) for a in args):
            raise TypeError("ctx.run takes a non-empty list of strings")
        self.check_cancelled()  # a cancelled call starts no more commands
        workdir = self._workdir(cwd)
        try:
            return run_command(
                args,
                policy=self.sandbox,
                workspace=self.workspace,
                cwd=workdir,
                network=self.network,
                writable=not self.read_only,
                env=env,
                input=input,
                timeout_s=timeout_s,
                started=self._started,
            )
        except SandboxUnavailable as exc:
            raise ToolFailure("internal", str(exc)) from None

    def _workdir(self, cwd: str | None) -> str:
        if self.workspace is None:
            if cwd is not None:
                raise ToolFailure("invalid_arguments", "this run has no workspace to run in")
            return "/tmp"
        root = Path(self.workspace).resolve()
        target = (root / (cwd or ".")).resolve()
        if not target.is_relative_to(root) or not target.is_dir():
            raise ToolFailure("permission_denied", f"cwd {cwd!r} is not a folder of the workspace")
        return str(target)

    def _started(self, process: Process) -> None:
        self.processes.append(process)
        if self.cancelled.is_set():  # cancelled as it started: it does not get to run
            process.signal(signal.SIGKILL)

    def signal_processes(self, sig: signal.Signals) -> int:
        """Send `sig` to every command the tool started that still runs; how many got it."""
        return sum(1 for proc in self.processes if proc.signal(sig))
