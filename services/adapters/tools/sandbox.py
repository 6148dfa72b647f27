"""The sandbox a subprocess tool or a command check runs in: what it is allowed,
as a bubblewrap (`bwrap`) command line.

Inside: the run's workspace read-write at its own path (read-only for a
read-only tool; its sockets, FIFOs and devices covered by an empty file), the
system (`/usr`, the `/bin`-style links, a few files of `/etc`) and the worker's
Python prefixes read-only wherever they live (`/tmp` included), a private `/tmp`
and `/dev/shm` (tmpfs, each size-capped), fresh `/proc` (its `sys`,
`sysrq-trigger`, `irq` and `bus` read-only, what Docker masks masked) and `/dev`,
and nothing else — not the worker's home, its environment, the state folder or
other runs' workspaces. New PID, IPC, UTS, cgroup and network namespaces (the
network a loopback that leads nowhere, or for a tool that declares
`network=True` a user-mode stack of its own: `usernet.py`), a seccomp filter
that refuses new user namespaces and the keyrings (`seccomp.py`), `no_new_privs`.

Never the host's root: a worker that is not root runs bwrap unprivileged (a
user namespace of its own, every capability dropped, no nested user
namespaces). A worker that is root runs bwrap privileged (it mounts as root,
without a user namespace: inside one, its root would be the host's) and the
command under `setpriv` as the host uid/gid `AGENTLEDGER_SANDBOX_UID`/`_GID`
(65534), with no capabilities, an empty bounding set and `no_new_privs`; its
workspace is handed to that uid first (`handover.py`). Limits (`prlimit`) on CPU
time, address space, file size and open files; the process count is bounded by
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

from agentledger.services.adapters.tools.sandbox_files import (
    private_file as private_file,  # re-exported
)
from agentledger.services.settings import Settings, sandbox_environ

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
    "ssl/certs",  # never ssl/private: the host's keys
    "ssl/openssl.cnf",
    "timezone",
)
MERGED = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# read-only whatever bwrap thinks (it leaves them when it believes they are already)
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
# what Docker masks in /proc: kernel memory, other users' keys, timers and
# scheduling of the whole host, hardware
PROC_MASKED = (
    "kcore",
    "keys",
    "timer_list",
    "sched_debug",
    "latency_stats",
    "acpi",
    "scsi",
    "asound",
)
# the capabilities the privileged bwrap keeps for the command's first process:
# setpriv's, to become the sandbox uid with an empty bounding set (then none are left)
SETPRIV_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


@dataclass(frozen=True)
class Limits:
    """Per sandboxed command. CPU time is per process; memory is the address
    space of each process; processes counts the whole tree."""

    cpu_s: int = 120
    memory_mb: int = 2048
    file_mb: int = 64
    processes: int = 64
    tmp_mb: int = 256  # /tmp and /dev/shm, each
    open_files: int = 1024


@dataclass(frozen=True)
class SandboxPolicy:
    """What the operator chose: sandboxed (the default) or not, the limits, and
    the worker variables (name, value) passed into every command (none by default)."""

    enabled: bool = True
    limits: Limits = field(default_factory=Limits)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    uid: int = 65534  # the host uid/gid of a command when the worker is root
    gid: int = 65534
    scan_max: int = 100_000  # entries of a workspace looked at before a command


@functools.cache
def policy_for(settings: Settings) -> SandboxPolicy:
    """The policy the settings describe (built once per settings object)."""
    limits = Limits(
        cpu_s=settings.sandbox_cpu_s,
        memory_mb=settings.sandbox_memory_mb,
        file_mb=settings.sandbox_file_mb,
        processes=settings.sandbox_processes,
        tmp_mb=settings.sandbox_tmp_mb,
    )
    env = tuple(sorted(sandbox_environ(settings).items()))
    return SandboxPolicy(
        enabled=settings.sandbox == "on", limits=limits, env=env,
        uid=settings.sandbox_uid, gid=settings.sandbox_gid, scan_max=settings.sandbox_scan_max,
    )  # fmt: skip


class SandboxUnavailable(Exception):
    """The sandbox is on and cannot be built here, or broke before the command
    ran; nothing was run. `hint` says what to change."""

    def __init__(self, what: str, hint: str = INSTALL_HINT):
        self.what = what
        self.hint = hint
        super().__init__(f"commands run sandboxed and {what}: {hint}")


def as_root() -> bool:
    """Whether this worker is root: then bwrap runs privileged and the command as the sandbox uid."""
    return os.geteuid() == 0


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


@functools.cache
def setpriv() -> str:
    """The path of util-linux's setpriv (a root worker's commands need it), or SandboxUnavailable."""
    found = shutil.which("setpriv")
    if found is None:
        raise SandboxUnavailable(
            "setpriv (util-linux) is not on PATH",
            "install util-linux (`apt-get install -y util-linux`): a root worker's commands "
            "become the sandbox uid through it",
        )
    return found


def limit_flags(limits: Limits, *, root: bool = False) -> list[str]:
    """prlimit's options. RLIMIT_NPROC counts every process of a uid on the host:
    for a root worker's commands, which all run as the one sandbox uid, it would
    let one command's processes stop another's exec (the pids cgroup bounds them)."""
    mb = 1024 * 1024
    return [
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",  # SIGXCPU, then SIGKILL a second later
        f"--as={limits.memory_mb * mb}",
        f"--fsize={limits.file_mb * mb}",
        f"--nofile={limits.open_files}",
        *([] if root else [f"--nproc={limits.processes}"]),  # the worker's own uid
        "--core=0",
    ]


def drop_to(policy: SandboxPolicy) -> list[str]:
    """What a root worker's command runs under: the sandbox uid/gid, no groups, no
    capabilities (permitted, effective, inheritable, ambient, bounding), no_new_privs."""
    return [
        setpriv(), "--reuid", str(policy.uid), "--regid", str(policy.gid), "--clear-groups",
        "--bounding-set", "-all", "--inh-caps", "-all", "--no-new-privs", "--",
    ]  # fmt: skip


def bwrap_flags(
    *,
    workspace: str | None,
    cwd: str,
    network: bool,
    limits: Limits,
    info_fd: int | str | None,
    writable: bool = True,
    read_only_paths: Sequence[str] = (),
    root: bool | None = None,
    masked: Sequence[str] = (),
    seccomp_fd: int | str | None = None,
    block_fd: int | str | None = None,
) -> list[str]:
    """bwrap's options for one command (everything before `--`). The workspace
    is read-only for a read-only tool's commands (`writable=False`);
    `read_only_paths` are more folders seen read-only (an MCP server's code);
    `masked` are files covered by an empty one (a workspace's sockets, FIFOs and
    devices). `root`: the worker is root (default: this process's euid). With
    `network` the sandbox waits on `block_fd` while its user-mode network is made.
    A descriptor is its number, or a placeholder `launch.py` fills in."""
    root = as_root() if root is None else root
    flags = _namespaces(root) + _system(network) + _proc() + ["--dev", "/dev"] + _scratch(limits)
    flags += _binds(workspace, writable, read_only_paths, masked)
    # the sandbox's own root and its /dev are tmpfs bwrap makes, unsized: read-only, or
    # a command could fill the worker's memory through them (its /dev/shm is its own)
    flags += ["--remount-ro", "/dev", "--remount-ro", "/"]
    # a root worker's bwrap keeps no DAC capability: a workspace of the sandbox uid
    # that is 0700 is entered by the command itself, as that uid (MARK, ENTER)
    flags += ["--chdir", "/" if root else cwd]
    return flags + _descriptors(seccomp_fd=seccomp_fd, block_fd=block_fd, info_fd=info_fd)


def _system(network: bool) -> list[str]:
    """The system, read-only: /usr, the merged folders (/bin, /lib…), the files of /etc
    a command needs, and with a network the sandbox's own resolv.conf."""
    flags = ["--ro-bind", "/usr", "/usr"]
    for name in MERGED:
        host = Path("/", name)
        if host.is_symlink():
            flags += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            flags += ["--ro-bind", str(host), str(host)]
    flags += _way_to([f"/etc/{name}" for name in ETC])
    for name in ETC:
        flags += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    if network:
        flags += ["--ro-bind", private_file("resolv.conf"), "/etc/resolv.conf"]
    return flags


def _scratch(limits: Limits) -> list[str]:
    """/tmp and /dev/shm: sized tmpfs of the sandbox's own."""
    size = str(limits.tmp_mb * 1024 * 1024)
    return [
        *("--perms", "1777", "--size", size, "--tmpfs", "/tmp"),
        *("--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"),
    ]


def _binds(
    workspace: str | None, writable: bool, read_only_paths: Sequence[str], masked: Sequence[str]
) -> list[str]:
    """The interpreter's folders and `read_only_paths` read-only, the workspace
    (read-only unless `writable`), and `masked` files covered by an empty one."""
    # bwrap makes the folders on the way to a bind 0700: the sandbox uid could not pass
    binds = [*python_paths(), *([workspace] if workspace else []), *read_only_paths]
    flags = _way_to(binds)
    for path in python_paths():
        flags += ["--ro-bind", path, path]
    if workspace is not None:
        flags += ["--bind" if writable else "--ro-bind", workspace, workspace]
    for path in read_only_paths:
        flags += ["--ro-bind", path, path]
    for path in masked:
        flags += ["--ro-bind", private_file("empty"), path]
    return flags


def _descriptors(
    *, seccomp_fd: int | str | None, block_fd: int | str | None, info_fd: int | str | None
) -> list[str]:
    flags = [] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]
    if block_fd is not None:
        flags += ["--block-fd", str(block_fd)]
    return flags + (["--info-fd", str(info_fd)] if info_fd is not None else [])


def _namespaces(root: bool) -> list[str]:
    common = [
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--unshare-net", "--die-with-parent", "--new-session", "--hostname", "sandbox",
    ]  # fmt: skip
    if not root:  # unprivileged: its own user namespace, nothing kept, no nested ones
        return ["--unshare-user", "--disable-userns", "--cap-drop", "ALL", *common]
    keep = [x for cap in SETPRIV_CAPS for x in ("--cap-add", cap)]
    return ["--cap-drop", "ALL", *keep, *common]


def _proc() -> list[str]:
    flags = ["--proc", "/proc"]
    for name in PROC_READ_ONLY:
        flags += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    for name in _present(PROC_MASKED):
        cover = "empty-dir" if os.path.isdir(f"/proc/{name}") else "empty"
        flags += ["--ro-bind", private_file(cover), f"/proc/{name}"]
    return flags


@functools.cache
def _present(names: tuple[str, ...]) -> tuple[str, ...]:
    """The entries of /proc this kernel has (a bind over a missing one would fail)."""
    return tuple(n for n in names if os.path.lexists(f"/proc/{n}"))


def _way_to(paths: Sequence[str]) -> list[str]:
    """`--dir` (0755) for every folder on the way to `paths` that bwrap would make."""
    made: list[str] = []
    for path in paths:
        parts = Path(path).parts[1:-1]
        for i in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:i])
            if folder not in made and folder != "/proc" and not folder.startswith("/proc/"):
                made.append(folder)
    return [x for folder in made for x in ("--perms", "0755", "--dir", folder)]


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
