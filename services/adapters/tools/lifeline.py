"""How a sandboxed command is started: the whole command line (the pids cgroup
joined, the limits set, bwrap, the lifeline, setpriv for a root worker, the
mark), and the descriptors it is given."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
from collections.abc import Sequence
from dataclasses import dataclass

from agentledger.services.adapters.tools import pids
from agentledger.services.adapters.tools.sandbox import (
    SandboxPolicy,
    as_root,
    bwrap_flags,
    drop_to,
    limit_flags,
    private_file,
    tools,
)

FIRST_FD = 10  # descriptors passed into a sandbox are this or above

# Inside the sandbox the command runs under this shell, which holds the read end
# of a pipe whose only write end is the worker's. When the worker dies (even by
# SIGKILL) the read sees EOF and everything in the sandbox is killed: bwrap's
# --die-with-parent alone lets the sandbox's init outlive its parent now and then
# (measured here). The command is started before SIGTERM is ignored, so a cancel
# reaches it; the shell passes on its exit status. The descriptors it is given
# are all 10 or more (process.py), so 7-9 are free here.
LIFELINE = (
    "exec 8</proc/self/fd/{fd} 9<&0; "  # dash names fds 0-9 only: reopen it low
    '"$@" <&9 7>/proc/self/fd/{started} 8<&- 9<&- & c=$!; '
    "trap '' TERM INT; "
    "{{ read _ <&8; kill -9 -1; }} 9<&- & "
    "exec 8<&- 9<&-; "
    'wait "$c"'
)
# The last step before the command (as the sandbox uid, after setpriv): into its
# folder, then a mark on fd 7 that tells the worker the sandbox was built. An exit
# without it is the sandbox's failure (bwrap's, setpriv's), never the command's.
MARK = 'cd -- "$0" || exit; printf 1 >&7; exec 7>&-; exec "$@"'
ENTER = 'cd -- "$0" && exec "$@"'  # the same without the mark (an MCP server)
LIFELINE_PROCESSES = 2  # the shell and its reader


def command_line(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    workspace: str | None,
    cwd: str,
    network: bool,
    writable: bool,
    fds: Fds,
    cgroup_procs: str | None,
    masked: Sequence[str] = (),
    root: bool | None = None,
) -> list[str]:
    """The full command: join the pids cgroup (a shell that writes its own pid,
    then execs), set the limits, enter the sandbox, run `argv` under the lifeline
    (as the sandbox uid when the worker is root)."""
    root = as_root() if root is None else root
    bwrap, prlimit = tools()
    line = [prlimit, *limit_flags(policy.limits, root=root), "--", bwrap]
    line += bwrap_flags(
        workspace=workspace,
        cwd=cwd,
        network=network,
        limits=policy.limits,
        info_fd=fds.info,
        writable=writable,
        root=root,
        masked=masked,
        seccomp_fd=fds.seccomp,
        block_fd=fds.block if network else None,
    )
    lifeline = LIFELINE.format(fd=fds.lifeline, started=fds.started)
    command = [*(drop_to(policy) if root else []), "/bin/sh", "-c", MARK, cwd, *argv]
    line += ["--", "/bin/sh", "-c", lifeline, pids.owner_mark(), *command]
    if cgroup_procs is not None:
        join = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
        line = ["/bin/sh", "-c", join, "sh", cgroup_procs, *line]
    return line


@dataclass(frozen=True)
class Fds:
    """The descriptors a sandboxed command is given (their numbers in the worker):
    bwrap's info (its init's pid), the lifeline's read end, the started mark's
    write end, the seccomp filter, and the block bwrap waits on for the network."""

    info: int
    lifeline: int
    started: int
    seccomp: int
    block: int


@dataclass
class Pipes:
    """A sandboxed command's pipes and seccomp filter: the worker's ends, and the
    ends passed into the sandbox (closed here once it started), all 10 or above."""

    info_r: int
    info_w: int
    life_r: int
    life_w: int  # stays here, close-on-exec: its closing is the lifeline's EOF
    started_r: int
    started_w: int
    seccomp: int
    block_r: int = -1
    block_w: int = -1

    @classmethod
    def open(cls, network: bool) -> Pipes:
        fds = [*os.pipe(), *os.pipe(), *os.pipe()]
        seccomp = os.open(private_file("seccomp.bpf"), os.O_RDONLY | os.O_CLOEXEC)
        block = os.pipe() if network else (-1, -1)
        return cls(*[_high(fd) for fd in (*fds, seccomp, *block)])

    def passed(self) -> Fds:
        return Fds(self.info_w, self.life_r, self.started_w, self.seccomp, self.block_r)

    def inside(self) -> tuple[int, ...]:
        return tuple(
            fd
            for fd in (self.info_w, self.life_r, self.started_w, self.seccomp, self.block_r)
            if fd >= 0
        )

    def started_by_now(self) -> bool:
        """Whether the lifeline wrote its mark (the sandbox was built)."""
        return (
            bool(select.select([self.started_r], [], [], 0)[0])
            and os.read(self.started_r, 1) == b"1"
        )

    def close_inside(self) -> None:
        _close(*self.inside())
        self.info_w = self.life_r = self.started_w = self.seccomp = self.block_r = -1

    def close(self) -> None:
        self.close_inside()
        _close(self.info_r, self.life_w, self.started_r, self.block_w)


def _high(fd: int) -> int:
    """`fd` moved to 10 or above (close-on-exec): the lifeline's shell uses 7-9."""
    if fd < 0 or fd >= FIRST_FD:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, FIRST_FD)
    os.close(fd)
    return moved


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
