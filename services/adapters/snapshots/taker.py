"""Taking a workspace's snapshot: walk it without following a link, keep each regular
file's content in the store and return the tree's id.

Incremental: the taker remembers, per workspace, each file's size, mtime, ctime and
inode with its digest, and reads again only a file where one of them changed — so a
write call's two snapshots of a large workspace cost a walk of its metadata and the
reading of the file it wrote. A symlink is recorded with its target, never followed;
a FIFO, socket or device is recorded as left out; a file past the per-file cap, or
past the snapshot's total cap, or past the entry cap, is recorded as left out with its
reason, and the tree carries a note saying so.

A file changed within RACY_NS of a walk's start is not remembered (file times are
coarse, a tick of the kernel's clock): the next walk reads it again, as git does with
racily clean entries, so an in-place rewrite of the same size is never missed."""

from __future__ import annotations

import dataclasses
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from agentledger.events.workspace_tree import Entry, Tree
from agentledger.services.adapters.snapshots.store import NotKept, SnapshotStore
from agentledger.services.adapters.snapshots.watch import EVERYTHING, FULL_WALK_S, Changed, Watcher
from agentledger.services.settings import Settings

REMEMBERED_WORKSPACES = 64  # workspaces whose file metadata a taker keeps
RACY_NS = 100_000_000
# a tree unchanged since the last snapshot is reused without touching the store for at
# most this long: well inside `collect`'s grace, so a tree in use is never collected
REUSE_S = 60.0


@dataclass(frozen=True, slots=True)
class Taken:
    tree_id: str
    note: str | None


@dataclass(frozen=True, slots=True)
class Caps:
    file_bytes: int
    total_bytes: int
    entries: int


Stamp = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


def snapshot_store(settings: Settings) -> SnapshotStore | None:
    """The operator's snapshot store (made on first use); None: snapshots are off."""
    path = settings.snapshot_path
    return None if path is None else SnapshotStore(Path(path))


def snapshotter(settings: Settings) -> Snapshotter | None:
    store = snapshot_store(settings)
    if store is None:
        return None
    caps = Caps(
        settings.snapshot_file_max_bytes, settings.snapshot_max_bytes,
        settings.workspace_max_files,
    )  # fmt: skip
    return Snapshotter(store, caps)


@dataclass(frozen=True, slots=True)
class _Folder:
    """A watched folder as the last walk found it: taken over whole when no event came."""

    subfolders: tuple[str, ...]  # names
    entries: dict[str, Entry]  # its own entries (not its sub-folders'), by relative path
    seen: dict[str, tuple[Stamp, Entry]]
    size: int  # its files' bytes


@dataclass(frozen=True, slots=True)
class _Last:
    """A workspace's last snapshot: its files' stamps and entries, its tree, and what
    the watcher needs to take folders over from it (their listings, the event number
    the walk started at, when the workspace was last walked whole)."""

    seen: dict[str, tuple[Stamp, Entry]]
    tree: Tree
    tree_id: str
    stored: float  # when the tree was last stored or touched (monotonic)
    folders: dict[str, _Folder]  # watched folders, by prefix
    seq: int
    root: tuple[int, int]
    walked_whole: float  # monotonic


class Snapshotter:
    def __init__(self, store: SnapshotStore, caps: Caps):
        self.store = store
        self.caps = caps
        self._last: OrderedDict[str, _Last] = OrderedDict()
        self._lock = threading.Lock()
        self._own: tuple[int, int] | None = None  # the store's folder, once made
        self._watcher: Watcher | None = None  # made on the first snapshot

    def _made(self) -> tuple[int, int]:
        if self._own is None:
            self.store.made()
            st = os.stat(self.store.root)
            self._own = (st.st_dev, st.st_ino)
        return self._own

    def watcher_watch(self, workspace: str, path: str, prefix: str) -> bool:
        return self._watcher is not None and self._watcher.watch(workspace, path, prefix)

    def take(self, workspace: str) -> Taken:
        """Snapshot `workspace` now; its tree id and what was left out."""
        with self._lock:
            last = self._last.get(workspace)
            own = self._made()
            if self._watcher is None:
                self._watcher = Watcher()
        watcher = self._watcher
        seq = watcher.mark()
        root, now = _identity(workspace), time.monotonic()
        changed = EVERYTHING
        if last is not None and last.root == root and now - last.walked_whole < FULL_WALK_S:
            changed = EVERYTHING if last.tree.notes else watcher.since(workspace, last.seq)
        if last is not None and not (changed.everything or changed.folders):
            if now - last.stored < REUSE_S:  # no event at all: the last tree as it is
                self._keep(workspace, dataclasses.replace(last, seq=seq))
                return Taken(last.tree_id, None)
        walk = _Walk(self, workspace, last, own, changed)
        walk.dir(workspace, "")
        if walk.redo:  # a cap reached in a folder taken over: walk it all, in order
            walk = _Walk(self, workspace, last, own, EVERYTHING)
            walk.dir(workspace, "")
        tree = Tree(walk.entries, tuple(walk.notes))
        if last is not None and last.tree == tree and now - last.stored < REUSE_S:
            tid, stored = last.tree_id, last.stored  # nothing changed: no text to build or store
        else:
            tid, stored = self.store.put_tree(tree), time.monotonic()
        whole = now if changed.everything or last is None else last.walked_whole
        self._keep(workspace, _Last(walk.now, tree, tid, stored, walk.folders, seq, root, whole))
        return Taken(tid, "; ".join(walk.notes) or None)

    def _keep(self, workspace: str, made: _Last) -> None:
        """Remember a workspace's snapshot, unless one from a later start is kept."""
        with self._lock:
            if (current := self._last.get(workspace)) is None or current.seq <= made.seq:
                self._last[workspace] = current = made
            self._last.move_to_end(workspace)
            gone = []
            while len(self._last) > REMEMBERED_WORKSPACES:
                gone.append(self._last.popitem(last=False)[0])
        assert self._watcher is not None
        for old in gone:  # its watches go with it (the kernel's are counted per user)
            self._watcher.forget(old)
        self._watcher.forget_before(workspace, current.seq)


def _identity(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


class _Walk:
    def __init__(
        self,
        taker: Snapshotter,
        ws: str,
        last: _Last | None,
        own: tuple[int, int],
        changed: Changed,
    ):
        self.t = taker
        self.ws = ws
        self.own = own
        self.last = last
        self.seen = last.seen if last is not None else {}
        self.changed = changed
        self.now: dict[str, tuple[Stamp, Entry]] = {}
        self.entries: dict[str, Entry] = {}
        self.folders: dict[str, _Folder] = {}
        self.notes: list[str] = []
        self.total = 0
        self.redo = False
        self.errors = 0  # a folder with one is listed again next time
        self.racy_after = time.time_ns() - RACY_NS

    def unchanged(self, prefix: str) -> _Folder | None:
        """The folder as the last walk found it, when no event came for it since."""
        if self.last is None or self.changed.everything or prefix in self.changed.folders:
            return None
        return self.last.folders.get(prefix)

    def taken_over(self, path: str, prefix: str, folder: _Folder) -> None:
        """A folder with no event since the last walk: its entries as they were, and
        its sub-folders walked (each may have changed)."""
        if len(self.entries) + len(folder.entries) > self.t.caps.entries or not self.fits(
            folder.size
        ):
            self.redo = True
            return
        self.entries.update(folder.entries)
        self.now.update(folder.seen)
        self.total += folder.size
        self.folders[prefix] = folder
        for name in folder.subfolders:
            self.dir(os.path.join(path, name), f"{prefix}{name}/")

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def dir(self, path: str, prefix: str) -> None:
        if self.redo:
            return
        folder = self.unchanged(prefix)
        if folder is not None:
            self.taken_over(path, prefix, folder)
            return
        watched = self.t.watcher_watch(self.ws, path, prefix)  # before listing: no event lost
        try:
            with os.scandir(path) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError as e:
            self.entries[prefix.rstrip("/") or "."] = Entry(
                "skipped", note=f"not listed: {e.strerror}"
            )
            self.errors += 1
            return
        errors = self.errors
        listed = self.listed(found, prefix)
        if watched and listed is not None and self.errors == errors:
            self.folders[prefix] = self.folder(*listed)  # taken over unless an event comes

    def folder(self, subfolders: list[str], own: list[str]) -> _Folder:
        entries = {rel: self.entries[rel] for rel in own}
        seen = {rel: self.now[rel] for rel in own if rel in self.now}
        size = sum(e.size or 0 for e in entries.values() if e.kind == "file")
        return _Folder(tuple(subfolders), entries, seen, size)

    def listed(
        self, found: list[os.DirEntry[str]], prefix: str
    ) -> tuple[list[str], list[str]] | None:
        """Each entry of a folder listed; its sub-folders' names and its own entries'
        paths (None: the entry cap reached)."""
        cap, seen, entries, now = self.t.caps.entries, self.seen, self.entries, self.now
        subfolders: list[str] = []
        own: list[str] = []
        for entry in found:
            if len(entries) >= cap:
                self.note(f"more than {cap} entries: the rest left out")
                return None
            rel = prefix + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as e:
                entries[rel] = Entry("skipped", note=f"not read: {e.strerror}")
                self.errors += 1
                continue
            if not stat.S_ISDIR(st.st_mode):
                own.append(rel)
            elif (st.st_dev, st.st_ino) != self.own:
                subfolders.append(entry.name)
            if stat.S_ISREG(st.st_mode):
                stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                known = seen.get(rel)
                if known is not None and known[0] == stamp and self.fits(st.st_size):
                    entries[rel] = known[1]  # unchanged since the last walk: not read again
                    now[rel] = known
                    self.total += st.st_size
                else:
                    self.file(entry.path, rel, st, stamp)
            else:
                self.other(entry, rel, st)
        return subfolders, own

    def fits(self, size: int) -> bool:
        return self.total + size <= self.t.caps.total_bytes

    def other(self, entry: os.DirEntry[str], rel: str, st: os.stat_result) -> None:
        try:
            if stat.S_ISLNK(st.st_mode):
                self.entries[rel] = Entry("link", target=os.readlink(entry.path))
            elif stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) != self.own:  # never the store itself
                    self.dir(entry.path, rel + "/")
            else:
                self.entries[rel] = Entry("skipped", note="not a regular file, folder or link")
        except OSError as e:
            self.entries[rel] = Entry("skipped", note=f"not read: {e.strerror}")
            self.errors += 1

    def file(self, path: str, rel: str, st: os.stat_result, stamp: Stamp) -> None:
        caps = self.t.caps
        if st.st_size > caps.file_bytes:
            self.entries[rel] = Entry("skipped", size=st.st_size, note="past the file cap")
            self.note(f"files larger than {caps.file_bytes} bytes left out")
            return
        if not self.fits(st.st_size):
            self.entries[rel] = Entry("skipped", size=st.st_size, note="past the total cap")
            self.note(f"files past {caps.total_bytes} bytes in all left out")
            return
        try:
            digest, size = self.t.store.put_file(path, caps.file_bytes)
        except NotKept as e:
            self.entries[rel] = Entry("skipped", size=st.st_size, note=e.note)
            return
        found = Entry("file", digest=digest, size=size)
        self.total += size
        self.entries[rel] = found
        if max(st.st_mtime_ns, st.st_ctime_ns) < self.racy_after:
            self.now[rel] = (stamp, found)
