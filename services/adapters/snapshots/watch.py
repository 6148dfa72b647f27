"""Which folders of a workspace changed since a snapshot: the kernel's inotify, one
instance per snapshot taker, a watch on each folder a walk listed. A folder with no
event since the walk that listed it is taken over from that walk without a `stat`
of its files; a folder with one is listed and its files' stamps compared again.

Trusted only where the kernel sees every write: a workspace on a local file system
(ext4, xfs, btrfs, tmpfs, overlay, zfs, f2fs), never on a network one (another
machine's writes raise no event here). Without inotify (another OS, the watch limit
reached, the queue overflowed) every folder counts as changed: the walk compares
every file's stamps, as before. A write through a shared memory map raises no event
(the kernel's rule): it shows at the folder's next event, or at the next full walk
(FULL_WALK_S)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import threading
from collections import defaultdict

# IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
# | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
_MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
_ONLYDIR_NOFOLLOW = 0x01000000 | 0x02000000
_OVERFLOW = 0x4000
_IGNORED = 0x8000  # the watch is gone (its folder removed): its number may come again
_EVENT = struct.Struct("iIII")
LOCAL_FS = frozenset(
    {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794C7630, 0x2FC12FC1, 0xF2F52010}
)
FULL_WALK_S = 30.0  # a workspace is walked whole at least this often
MAX_EVENTS = 10_000  # kept per workspace between two of its snapshots


class Changed:
    """What changed in a workspace since a point: `folders` (relative prefixes, "" the
    workspace's top, each ending in "/" otherwise), or `everything`."""

    __slots__ = ("everything", "folders")

    def __init__(self, everything: bool, folders: frozenset[str] = frozenset()):
        self.everything = everything
        self.folders = folders


EVERYTHING = Changed(True)


class Watcher:
    """One inotify instance; thread-safe. Events are numbered: a caller keeps the
    number a walk started at, and asks what changed since."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd = _init()
        self._seq = 0
        self._lost = 0  # the seq at the last overflow: everything since is unknown
        self._lost_in: dict[str, int] = {}  # a workspace's own: too many events kept
        self._where: dict[int, dict[str, str]] = defaultdict(dict)  # wd -> {workspace: prefix}
        self._events: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self._local: dict[str, bool] = {}

    @property
    def on(self) -> bool:
        return self._fd >= 0

    def mark(self) -> int:
        """Read what the kernel queued; the number a walk starting now covers."""
        with self._lock:
            self._drain()
            return self._seq

    def since(self, workspace: str, seq: int) -> Changed:
        """The folders of `workspace` with an event after `seq` (call after `mark`)."""
        with self._lock:
            lost = max(self._lost, self._lost_in.get(workspace, 0))
            if self._fd < 0 or lost > seq or not self._is_local(workspace):
                return EVERYTHING
            events = self._events.get(workspace, [])
            return Changed(False, frozenset(p for s, p in events if s > seq))

    def forget_before(self, workspace: str, seq: int) -> None:
        """Events up to `seq` are covered by the workspace's newest walk."""
        with self._lock:
            events = self._events.get(workspace)
            if events:
                self._events[workspace] = [e for e in events if e[0] > seq]

    def watch(self, workspace: str, path: str, prefix: str) -> bool:
        """Watch a folder before it is listed; False when it cannot be watched."""
        if self._fd < 0 or _LIBC is None:
            return False
        with self._lock:  # a drain between the watch and its place would lose events
            if not self._is_local(workspace):
                return False  # never trusted there: no watch slot spent on it
            wd = _LIBC.inotify_add_watch(self._fd, os.fsencode(path), _MASK | _ONLYDIR_NOFOLLOW)
            if wd < 0:
                return False
            self._where[wd][workspace] = prefix
        return True

    def forget(self, workspace: str) -> None:
        """A workspace no longer remembered: its watches removed, its events dropped."""
        with self._lock:
            for wd in [wd for wd, where in self._where.items() if workspace in where]:
                where = self._where[wd]
                del where[workspace]
                if not where:
                    del self._where[wd]
                    if self._fd >= 0 and _LIBC is not None:
                        _LIBC.inotify_rm_watch(self._fd, wd)  # its IN_IGNORED finds no place
            self._events.pop(workspace, None)
            self._lost_in.pop(workspace, None)
            self._local.pop(workspace, None)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)

    def _is_local(self, workspace: str) -> bool:
        known = self._local.get(workspace)
        if known is None:
            known = self._local[workspace] = _fs_type(workspace) in LOCAL_FS
        return known

    def _drain(self) -> None:
        while self._fd >= 0:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
                at += _EVENT.size + length
                self._seq += 1
                if mask & _OVERFLOW:
                    self._lost = self._seq
                    continue
                where = self._where.pop(wd, {}) if mask & _IGNORED else self._where.get(wd, {})
                for ws, prefix in where.items():
                    kept = self._events[ws]
                    kept.append((self._seq, prefix))
                    if len(kept) > MAX_EVENTS:  # nobody took its snapshot for long: walk it whole
                        self._lost_in[ws] = self._seq
                        kept.clear()


def _load() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch, libc.statfs  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _load()


def _init() -> int:
    if _LIBC is None:
        return -1
    fd: int = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    return fd


def _fs_type(path: str) -> int:
    """The file system's magic number (statfs's f_type, the struct's first word); -1
    when unknown."""
    if _LIBC is None:
        return -1
    buf = ctypes.create_string_buffer(256)
    if _LIBC.statfs(os.fsencode(path), buf) != 0:
        return -1
    return int(ctypes.c_long.from_buffer(buf).value) & 0xFFFFFFFF
