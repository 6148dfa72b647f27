"""Running one command, sandboxed or not: its own process group, a minimal
environment, bounded output, its timeout, and the process limit watched until it
exits. The executor can signal it while it runs (cancellation): SIGTERM goes to
the processes inside the sandbox, SIGKILL ends the sandbox whole.

Before a sandboxed command, its workspace is walked once (`handover.py`: handed
to the sandbox uid when the worker is root, its special files covered); a
`network=True` command's sandbox waits until its user-mode network is up
(`usernet.py`). A sandbox that fails before the command starts raises
SandboxUnavailable with bwrap's reason and what to change: it is never reported
as the command's own exit."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from agentledger.services.adapters.tools import handover, pids, usernet
from agentledger.services.adapters.tools.capture import Bounded
from agentledger.services.adapters.tools.lifeline import LIFELINE_PROCESSES, Pipes, command_line
from agentledger.services.adapters.tools.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    as_root,
    environment,
)
from agentledger.services.adapters.tools.sandbox_failures import explain

NOT_FOUND = 127  # the shell's exit status for a program it cannot find
WATCH_S = 0.01  # how often a running command's process count is looked at
OUTPUT_CHARS = 200_000  # per stream; the rest is counted and left out
READ_CHUNK = 65536


class Completed(subprocess.CompletedProcess[str]):
    """A command's result; `limit` names the limit that stopped it, if one did."""

    def __init__(
        self, args: Sequence[str], returncode: int, stdout: str, stderr: str, limit: str | None
    ):
        super().__init__(list(args), returncode, stdout, stderr)
        self.limit = limit


class Process:
    """A started command. `signal` is what the executor calls on a cancel."""

    def __init__(self, popen: subprocess.Popen[bytes], group: pids.PidsCgroup | None):
        self.popen = popen
        self.group = group
        self.init_pid: int | None = None  # the sandbox's PID 1, seen from the host
        self.pid_ns: int | None = None
        self.killed_for: str | None = None
        self.signalled = False  # by the executor (a cancel): not the sandbox's failure

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def signal(self, sig: signal.Signals) -> bool:
        """Whether the command was still there to get it."""
        if self.popen.poll() is not None:
            return False
        self.signalled = True
        if sig == signal.SIGKILL:
            self.kill()
            return True
        inside = self._inside()
        if inside is None:  # not sandboxed, or not started yet: its process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            return True
        for pid in inside:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return True

    def kill(self) -> None:
        if self.init_pid is not None:  # the sandbox's init takes its whole namespace with it
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        if self.group is not None:
            self.group.kill()

    def _inside(self) -> list[int] | None:
        if self.pid_ns is None:
            return None
        return [p for p in pids.members(self.pid_ns) if p != self.init_pid]

    def over_limit(self, limit: int) -> bool:
        if self.group is not None:
            return self.group.hit()
        if self.init_pid is None or self.pid_ns is None:
            return False
        count = pids.namespace_count(self.init_pid, self.pid_ns)
        # bwrap's init and the lifeline's two are not the command's
        return count is not None and count - 1 - LIFELINE_PROCESSES > limit


def run_command(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    workspace: str | None,
    cwd: str,
    network: bool = False,
    writable: bool = True,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    timeout_s: float | None = None,
    started: Any = None,
) -> Completed:
    """Run `argv` to its end. `started(process)` is told of it as soon as it runs.
    Raises SandboxUnavailable (nothing ran) or subprocess.TimeoutExpired (killed)."""
    if not policy.enabled:
        return _run(list(argv), argv, policy, cwd, env, input, timeout_s, started, None)
    root = as_root()
    masked: tuple[str, ...] = ()
    if workspace is not None:
        owner = (policy.uid, policy.gid) if root else None
        masked = handover.prepare(workspace, owner=owner, limit=policy.scan_max).special
    pids.reap_orphans()
    parent = pids.cgroup_parent()
    # bwrap's two processes and the lifeline's two are not the command's
    allowed = policy.limits.processes + 2 + LIFELINE_PROCESSES
    pipes = Pipes.open(network)
    group = None
    try:
        group = pids.PidsCgroup.make(parent, allowed) if parent else None
        line = command_line(
            argv,
            policy=policy,
            workspace=workspace,
            cwd=cwd,
            network=network,
            writable=writable,
            fds=pipes.passed(),
            cgroup_procs=str(group.procs) if group else None,
            masked=masked,
            root=root,
        )
        sandbox = _Sandbox(pipes, group, network, root)
        return _run(line, argv, policy, "/", env, input, timeout_s, started, sandbox)
    finally:
        pipes.close()
        if group is not None:
            group.remove()


@dataclass
class _Sandbox:
    pipes: Pipes
    group: pids.PidsCgroup | None
    network: bool
    root: bool
    net: usernet.UserNet | None = None


def _run(
    line: list[str],
    argv: Sequence[str],
    policy: SandboxPolicy,
    cwd: str,
    env: Mapping[str, str] | None,
    input: str | None,
    timeout_s: float | None,
    started: Any,
    sandbox: _Sandbox | None,
) -> Completed:
    popen = subprocess.Popen(
        line,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(policy, env),
        cwd=cwd,
        start_new_session=True,
        pass_fds=sandbox.pipes.inside() if sandbox else (),
    )
    if sandbox is not None:
        sandbox.pipes.close_inside()
    process = Process(popen, sandbox.group if sandbox else None)
    if started is not None:
        started(process)
    try:
        return _follow(process, argv, input, timeout_s, policy, sandbox)
    finally:
        if sandbox is not None and sandbox.net is not None:
            sandbox.net.close()


def _follow(
    process: Process,
    argv: Sequence[str],
    input: str | None,
    timeout_s: float | None,
    policy: SandboxPolicy,
    sandbox: _Sandbox | None,
) -> Completed:
    popen = process.popen
    out, err = Bounded(OUTPUT_CHARS), Bounded(OUTPUT_CHARS)
    readers = [_reader(popen.stdout, out), _reader(popen.stderr, err)]
    if input is not None:
        readers.append(_writer(popen.stdin, input))
    info = _InfoReader(sandbox.pipes.info_r if sandbox else -1)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while popen.poll() is None:
        _watch(process, info, deadline, policy.limits.processes, sandbox)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(WATCH_S)
    for t in readers:
        t.join(1.0)  # a pipe held open by an escaped grandchild (unsandboxed) is not waited for
    if process.killed_for == "timeout":
        raise subprocess.TimeoutExpired(list(argv), timeout_s or 0, out.text(), err.text())
    return _completed(process, argv, policy, sandbox, out.text(), err.text())


def _watch(
    process: Process,
    info: _InfoReader,
    deadline: float | None,
    limit: int,
    sandbox: _Sandbox | None,
) -> None:
    """One look at a running command: its sandbox's init pid once bwrap tells it (then
    its network is made), and a kill when it passes its process limit or its deadline."""
    if info.read() is not None and process.init_pid is None:
        process.init_pid, process.pid_ns = info.value["child-pid"], info.value["pid-namespace"]
        if sandbox is not None and sandbox.network:
            _network(process, sandbox)
    if sandbox is not None and process.over_limit(limit):
        process.killed_for = f"the limit of {limit} processes"
        process.kill()
    elif deadline is not None and time.monotonic() > deadline:
        process.killed_for = "timeout"
        process.kill()


def _completed(
    process: Process,
    argv: Sequence[str],
    policy: SandboxPolicy,
    sandbox: _Sandbox | None,
    stdout: str,
    stderr: str,
) -> Completed:
    """The ended command's result, saying which limit stopped it; SandboxUnavailable
    when the sandbox itself never started."""
    built = process.killed_for is not None or process.signalled or sandbox is None
    if not built and sandbox is not None and not sandbox.pipes.started_by_now():
        raise SandboxUnavailable(*explain(stderr, root=sandbox.root, network=sandbox.network))
    code = process.popen.returncode
    if sandbox is not None and code in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        process.killed_for = f"the CPU limit of {policy.limits.cpu_s} s"
        stderr += f"\n[sandbox: stopped at {process.killed_for}]"
    elif process.killed_for is not None:
        stderr += f"\n[sandbox: stopped at {process.killed_for}]"
        code = -signal.SIGKILL
    elif sandbox is not None and code == NOT_FOUND:
        stderr += f"\n[sandbox: {not_found_hint(policy)}]"
    return Completed(argv, code, stdout, stderr, process.killed_for)


def not_found_hint(policy: SandboxPolicy) -> str:
    """What a sandboxed command that exited 127 (a program not found) could find."""
    path = environment(policy, None)["PATH"]
    return (
        f"exit 127: a program was not found in the sandbox, whose PATH is {path}; "
        f"`python` there is this worker's interpreter {sys.executable} "
        f"(bound from {os.path.realpath(sys.executable)})"
    )


def _network(process: Process, sandbox: _Sandbox) -> None:
    """The sandbox waits (bwrap's --block-fd) until its user-mode network is up."""
    assert process.init_pid is not None
    try:
        sandbox.net = usernet.attach(process.init_pid, root=sandbox.root)
    except usernet.NetworkUnavailable as exc:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(5)
        raise SandboxUnavailable(str(exc), usernet.hint(str(exc))) from None
    with contextlib.suppress(OSError):  # a sandbox already gone is found by the caller
        os.write(sandbox.pipes.block_w, b"1")


class _InfoReader:
    """bwrap's --info-fd: one JSON object with the sandbox's init pid and namespaces."""

    def __init__(self, fd: int):
        self._fd = fd
        self._buf = b""
        self.value: dict[str, Any] = {}
        self._done = fd < 0

    def read(self) -> dict[str, Any] | None:
        if self._done:
            return self.value or None
        while select.select([self._fd], [], [], 0)[0]:
            chunk = os.read(self._fd, 4096)
            if not chunk:
                self._done = True
                break
            self._buf += chunk
        with contextlib.suppress(ValueError):
            self.value = json.loads(self._buf)
            self._done = True
        return self.value or None


def _reader(pipe: IO[bytes] | None, into: Bounded) -> threading.Thread:
    def pump() -> None:
        assert pipe is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with pipe:
            while chunk := pipe.read1(READ_CHUNK):  # type: ignore[attr-defined]
                into.write(decoder.decode(chunk))
        into.write(decoder.decode(b"", final=True))

    t = threading.Thread(target=pump, daemon=True, name="command-output")
    t.start()
    return t


def _writer(pipe: IO[bytes] | None, text: str) -> threading.Thread:
    def feed() -> None:
        assert pipe is not None
        with contextlib.suppress(BrokenPipeError, OSError), pipe:
            pipe.write(text.encode("utf-8"))

    t = threading.Thread(target=feed, daemon=True, name="command-input")
    t.start()
    return t


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
