"""Bounding how many processes a sandboxed command may have.

As root `RLIMIT_NPROC` is ignored, so the count needs another answer. The hard
one is a pids cgroup: a child of the worker's own cgroup with `pids.max`, which
makes the kernel refuse the fork past the limit (cgroup v1's pids hierarchy, or
cgroup v2 when the worker's cgroup delegates the pids controller). Where no such
cgroup can be made, the sandbox's PID namespace is counted from outside every
few milliseconds and killed whole when it goes over: that bounds a fork bomb to
the limit plus what it forks between two looks, which on a busy host can be the
host's whole process table (no hard bound; the worker says so once in its log). Either way the command is stopped
once it reaches the limit, and the caller is told so."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

GROUP = "agentledger"
STALE_S = 60.0  # an empty sandbox cgroup older than this was left by a dead worker


@functools.cache
def cgroup_parent() -> Path | None:
    """Where this process may make pids cgroups, or None (probed once, and said
    once in the log when there is none: the process limit is then no hard bound)."""
    found = _probe_parent()
    if found is None:
        log.warning(
            "no pids cgroup can be made here: sandboxed commands' process limit is "
            "watched from outside, and a fork bomb can outrun the watch on a busy host"
        )
    return found


def _probe_parent() -> Path | None:
    for mount, version in _pids_mounts():
        own = _own_cgroup(version)
        if own is None:
            continue
        parent = Path(mount, own.lstrip("/"), GROUP)
        try:
            parent.mkdir(exist_ok=True)
            probe = PidsCgroup.make(parent, 8)
        except OSError:
            continue
        if probe is not None:
            probe.remove()
            return parent
    return None


def _pids_mounts() -> list[tuple[str, int]]:
    """(mount point, cgroup version) of the hierarchies that can count pids."""
    found: list[tuple[str, int]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        mount, fstype, options = fields[4], rest[0], rest[2].split(",")
        if fstype == "cgroup" and "pids" in options:
            found.append((mount, 1))
        elif fstype == "cgroup2" and "pids" in _read(Path(mount, "cgroup.controllers")).split():
            found.append((mount, 2))
    return found


def _own_cgroup(version: int) -> str | None:
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if version == 2 and number == "0" and controllers == "":
            return path
        if version == 1 and "pids" in controllers.split(","):
            return path
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@dataclass(frozen=True)
class PidsCgroup:
    """One sandbox's pids cgroup. The command joins it before it execs anything
    (its `cgroup.procs`), so every process it makes is counted."""

    path: Path

    @classmethod
    def make(cls, parent: Path, limit: int) -> PidsCgroup | None:
        _remove_stale(parent)
        path = parent / uuid.uuid4().hex[:16]
        path.mkdir()
        group = cls(path)
        try:
            (path / "pids.max").write_text(str(limit))
        except OSError:
            group.remove()
            return None
        return group

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def hit(self) -> bool:
        """Whether a fork was refused for the limit."""
        for line in _read(self.path / "pids.events").splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip() not in ("", "0"):
                return True
        return False

    def kill(self) -> None:
        for _ in range(50):
            pids = [int(p) for p in _read(self.procs).split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)  # the last processes are still being reaped


def _remove_stale(parent: Path) -> None:
    now = time.time()
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            with contextlib.suppress(OSError):
                if child.is_dir() and now - child.stat().st_mtime > STALE_S:
                    child.rmdir()  # refused while it still has processes


def namespace_count(init_pid: int, pid_ns: int) -> int | None:
    """How many processes the PID namespace whose init is `init_pid` holds, or
    None before its own /proc is up (seen from outside through the init's root)."""
    proc = f"/proc/{init_pid}/root/proc"
    try:
        if os.stat(f"{proc}/1/ns/pid").st_ino != pid_ns:
            return None
        return sum(1 for e in os.listdir(proc) if e.isdigit())
    except OSError:
        return None


def members(pid_ns: int) -> list[int]:
    """Host pids of every process in the PID namespace `pid_ns`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == pid_ns:
                    found.append(int(entry))
    return found


MARK = "agentledger-sandbox"
REAP_EVERY_S = 10.0
_last_reap = [0.0]


def owner_mark() -> str:
    """Carried in every sandbox's command line: this worker's pid and start time."""
    return f"{MARK}:{os.getpid()}:{_start_time(os.getpid())}"


def reap_orphans(*, force: bool = False) -> int:
    """Kill what is left of sandboxes whose worker died (at most every
    REAP_EVERY_S). A worker SIGKILLed while bwrap was still setting a sandbox up
    leaves its init waiting forever, with no command yet: the lifeline cannot
    help there. Only processes carrying the mark of a dead worker are touched."""
    now = time.monotonic()
    if not force and now - _last_reap[0] < REAP_EVERY_S:
        return 0
    _last_reap[0] = now
    killed = 0
    needle = MARK.encode() + b":"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        at = cmdline.find(needle)
        if at < 0:
            continue
        mark = cmdline[at:].split(b"\x00", 1)[0].decode(errors="replace")
        _, pid, started = (mark.split(":") + ["", ""])[:3]
        if pid.isdigit() and _start_time(int(pid)) != started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
    return killed


def _start_time(pid: int) -> str:
    stat = _read(Path(f"/proc/{pid}/stat"))
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""
