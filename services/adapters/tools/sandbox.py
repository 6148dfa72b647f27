"""The sandbox a subprocess tool or a command check runs in: what it is allowed,
as a bubblewrap (`bwrap`) command line.

Inside: the run's workspace read-write at its own path (read-only for a
read-only tool), the system (`/usr`, the
`/bin`-style links, a few files of `/etc`) and the worker's Python prefix
read-only, a private `/tmp` (tmpfs, size-capped), fresh `/proc` and `/dev`, and
nothing else — not the worker's home, its environment, the state folder or other
runs' workspaces. New user, PID, IPC, UTS and cgroup namespaces, every
capability dropped (as root bwrap would keep them inside its user namespace, and
they would let the command remount `/usr` read-write), no nested user
namespaces, and a network namespace of its own with only a loopback that leads
nowhere unless the tool declares `network=True`. Limits (`prlimit`) on CPU time,
address space, file size and open files; the process count is bounded by
`services/adapters/tools/pids.py`.

Settings choose it (`AGENTLEDGER_SANDBOX`, `AGENTLEDGER_SANDBOX_*`); `off` runs
commands as the worker, unconfined, with the same minimal environment."""

from __future__ import annotations

import functools
import os
import shutil
import site
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.adapters.tools import pids
from services.settings import Settings, sandbox_environ

INSTALL_HINT = (
    "install bubblewrap (`apt-get install -y bubblewrap`), "
    "or set AGENTLEDGER_SANDBOX=off to run commands unsandboxed with the worker's rights"
)
# what programs read from /etc; never shadow, the worker's own configuration or keys
ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "passwd",
    "protocols",
    "services",
    "ssl",
    "timezone",
)
NETWORK_ETC = ("resolv.conf",)
MERGED = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class Limits:
    """Per sandboxed command. CPU time is per process; memory is the address
    space of each process; processes counts the whole tree."""

    cpu_s: int = 120
    memory_mb: int = 2048
    file_mb: int = 64
    processes: int = 64
    tmp_mb: int = 256
    open_files: int = 1024


@dataclass(frozen=True)
class SandboxPolicy:
    """What the operator chose: sandboxed (the default) or not, the limits, and
    the worker variables (name, value) passed into every command (none by default)."""

    enabled: bool = True
    limits: Limits = field(default_factory=Limits)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@functools.cache
def policy_for(settings: Settings) -> SandboxPolicy:
    """The policy the settings describe (built once per settings object)."""
    limits = Limits(
        cpu_s=settings.sandbox_cpu_s,
        memory_mb=settings.sandbox_memory_mb,
        file_mb=settings.sandbox_file_mb,
        processes=settings.sandbox_processes,
    )
    env = tuple(sorted(sandbox_environ(settings).items()))
    return SandboxPolicy(enabled=settings.sandbox == "on", limits=limits, env=env)


class SandboxUnavailable(Exception):
    """The sandbox is on and cannot be built here; nothing was run."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(f"commands run sandboxed and {what}: {INSTALL_HINT}")


@functools.cache
def tools() -> tuple[str, str]:
    """The paths of bwrap and prlimit, or SandboxUnavailable naming what is missing."""
    bwrap, prlimit = shutil.which("bwrap"), shutil.which("prlimit")
    if bwrap is None:
        raise SandboxUnavailable("bwrap is not on PATH")
    if prlimit is None:
        raise SandboxUnavailable("prlimit (util-linux) is not on PATH")
    return bwrap, prlimit


def environment(policy: SandboxPolicy, extra: Mapping[str, str] | None) -> dict[str, str]:
    """A command's whole environment: a minimal base, the variables the operator
    passes through, then the tool's own. Nothing else of the worker's."""
    path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    env.update(dict(policy.env))
    env.update(extra or {})
    return env


def limit_flags(limits: Limits) -> list[str]:
    mb = 1024 * 1024
    return [
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",  # SIGXCPU, then SIGKILL a second later
        f"--as={limits.memory_mb * mb}",
        f"--fsize={limits.file_mb * mb}",
        f"--nofile={limits.open_files}",
        f"--nproc={limits.processes}",  # counted for a worker that is not root
        "--core=0",
    ]


def bwrap_flags(
    *,
    workspace: str | None,
    cwd: str,
    network: bool,
    limits: Limits,
    info_fd: int | None,
    writable: bool = True,
    read_only_paths: Sequence[str] = (),
) -> list[str]:
    """bwrap's options for one command (everything before `--`). The workspace
    is read-only for a read-only tool's commands (`writable=False`);
    `read_only_paths` are more folders seen read-only (an MCP server's code)."""
    flags = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *([] if network else ["--unshare-net"]),
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in MERGED:
        host = Path("/", name)
        if host.is_symlink():
            flags += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            flags += ["--ro-bind", str(host), str(host)]
    for name in (*ETC, *(NETWORK_ETC if network else ())):
        flags += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for path in python_paths():
        flags += ["--ro-bind", path, path]
    flags += ["--proc", "/proc", "--dev", "/dev"]
    flags += ["--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    if workspace is not None:
        flags += ["--bind" if writable else "--ro-bind", workspace, workspace]
    for path in read_only_paths:
        flags += ["--ro-bind", path, path]
    # the sandbox's own root is a tmpfs bwrap makes: read-only, or a command could
    # fill the worker's memory through `/` or the folders around the workspace
    flags += ["--remount-ro", "/", "--chdir", cwd]
    return flags + (["--info-fd", str(info_fd)] if info_fd is not None else [])


@functools.cache
def python_paths() -> tuple[str, ...]:
    """The worker interpreter's prefixes and site-packages, outside /usr: bound
    read-only so that `python -m pytest` works though the home they live in is
    hidden. Nested paths are left out (their parent is bound)."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates.update(site.getsitepackages())
    user_site = site.getusersitepackages()
    if user_site:
        candidates.add(user_site)
    real = sorted({os.path.realpath(p) for p in candidates if os.path.isdir(p)})
    kept: list[str] = []
    for path in real:
        if path == "/usr" or path.startswith("/usr/"):
            continue
        if not any(path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return tuple(kept)


# Inside the sandbox the command runs under this shell, which holds the read end
# of a pipe whose only write end is the worker's. When the worker dies (even by
# SIGKILL) the read sees EOF and everything in the sandbox is killed: bwrap's
# --die-with-parent alone lets the sandbox's init outlive its parent now and then
# (measured here). The command is started before SIGTERM is ignored, so a cancel
# reaches it; the shell passes on its exit status.
LIFELINE = (
    "exec 8</proc/self/fd/{fd} 9<&0; "  # dash names fds 0-9 only: reopen it low
    '"$@" <&9 8<&- 9<&- & c=$!; '
    "trap '' TERM INT; "
    "{{ read _ <&8; kill -9 -1; }} 9<&- & "
    "exec 8<&- 9<&-; "
    'wait "$c"'
)
LIFELINE_PROCESSES = 2  # the shell and its reader


def command_line(
    argv: Sequence[str],
    *,
    policy: SandboxPolicy,
    workspace: str | None,
    cwd: str,
    network: bool,
    writable: bool,
    info_fd: int,
    lifeline_fd: int,
    cgroup_procs: str | None,
) -> list[str]:
    """The full command: join the pids cgroup (a shell that writes its own pid,
    then execs), set the limits, enter the sandbox, run `argv` under the lifeline."""
    bwrap, prlimit = tools()
    line = [prlimit, *limit_flags(policy.limits), "--", bwrap]
    line += bwrap_flags(
        workspace=workspace,
        cwd=cwd,
        network=network,
        limits=policy.limits,
        info_fd=info_fd,
        writable=writable,
    )
    line += ["--", "/bin/sh", "-c", LIFELINE.format(fd=lifeline_fd), pids.owner_mark(), *argv]
    if cgroup_procs is not None:
        join = 'echo $$ > "$1" || exit 125; shift; exec "$@"'
        line = ["/bin/sh", "-c", join, "sh", cgroup_procs, *line]
    return line
