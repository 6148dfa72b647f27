"""The snapshot store: a folder the operator chooses (AGENTLEDGER_SNAPSHOT_DIR; by
default `<state folder>/snapshots`) holding each file content once, by its SHA-256
(`blobs/ab/cdef…`), and each workspace tree once, by its id (`trees/ab/cdef….json`).
The same content in any snapshot of any run is one blob.

A blob is streamed while it is hashed (never whole in memory), into a temporary file
renamed into place, so a reader sees a whole blob or none; a blob read back is checked
against its name. Files are opened without following a link and only a regular file
is read, so a link swapped in for a file cannot make the store read the host."""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agentledger.events.workspace_tree import Tree, tree_from_text

CHUNK = 1 << 20
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotKept(Exception):
    """A file was not kept: `note` says why (past the cap, not a regular file, gone)."""

    def __init__(self, note: str):
        super().__init__(note)
        self.note = note


class SnapshotMissing(LookupError):
    """A tree or blob an event names is not in the store (collected, or another store)."""


@dataclass(frozen=True)
class SnapshotStore:
    root: Path

    def made(self) -> None:
        """Make the store's folders (on the first snapshot: reading never makes them)."""
        for sub in ("blobs", "trees", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)

    def _blob(self, digest: str) -> Path:
        hexd = digest.removeprefix("sha256:")
        if len(hexd) != 64 or any(c not in "0123456789abcdef" for c in hexd):
            raise SnapshotMissing(f"{digest!r} is not a sha256 digest")
        return self.root / "blobs" / hexd[:2] / hexd[2:]

    def put_file(self, path: str, max_bytes: int) -> tuple[str, int]:
        """Keep a workspace file's content; its digest and size. NotKept when it is
        not a regular file, is gone, or is (or grows) past `max_bytes`. The file is
        hashed first and copied only when the store lacks its content (most files a
        snapshot reads again are unchanged: no file is made for them)."""
        try:
            fd = os.open(path, _OPEN)
        except OSError as e:
            raise NotKept(f"not read: {e.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotKept("not a regular file")
            digest, size = _hashed(f, max_bytes, None)
            if self._blob(digest).exists():
                return digest, size
            f.seek(0)
            return self._copied(f, max_bytes)

    def _copied(self, f: BinaryIO, max_bytes: int) -> tuple[str, int]:
        """Copy `f` into the store, named by the digest of what was copied (the file
        may have changed since it was hashed)."""
        tmp = self.root / "tmp" / uuid.uuid4().hex
        try:
            with open(tmp, "xb") as out:
                digest, size = _hashed(f, max_bytes, out)
            target = self._blob(digest)
            if not target.exists():
                target.parent.mkdir(exist_ok=True, mode=0o700)
                os.replace(tmp, target)
            return digest, size
        finally:
            tmp.unlink(missing_ok=True)

    def has_blob(self, digest: str) -> bool:
        return self._blob(digest).exists()

    def blob(self, digest: str) -> bytes:
        """A blob's content, checked against its digest."""
        try:
            data = self._blob(digest).read_bytes()
        except FileNotFoundError:
            raise SnapshotMissing(f"blob {digest!r} is not in the snapshot store") from None
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise SnapshotMissing(f"blob {digest!r} is damaged: its content has another digest")
        return data

    def copy_blob(self, digest: str, out: BinaryIO) -> None:
        """Stream a blob into `out` (never whole in memory); SnapshotMissing when it is
        absent, or damaged (what was written then is not the content: discard it)."""
        try:
            f = open(self._blob(digest), "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise SnapshotMissing(f"blob {digest!r} is not in the snapshot store") from None
        with f:
            found, _ = _hashed(f, 1 << 62, out)
        if found != digest:
            raise SnapshotMissing(f"blob {digest!r} is damaged: its content has another digest")

    def put_tree(self, tree: Tree) -> str:
        tid = tree.id
        path = self._tree(tid)
        if path.exists():
            os.utime(path)  # in use again: young, so `collect` keeps it until it is recorded
        else:
            path.parent.mkdir(exist_ok=True, mode=0o700)
            tmp = self.root / "tmp" / uuid.uuid4().hex
            tmp.write_text(tree.canonical(), encoding="ascii")
            os.replace(tmp, path)
        return tid

    def tree(self, tree_id: str) -> Tree:
        try:
            text = self._tree(tree_id).read_text(encoding="ascii")
        except FileNotFoundError:
            raise SnapshotMissing(f"snapshot {tree_id!r} is not in the snapshot store") from None
        tree = tree_from_text(text)
        if tree.id != tree_id:
            raise SnapshotMissing(f"snapshot {tree_id!r} is damaged: its text has another id")
        return tree

    def _tree(self, tree_id: str) -> Path:
        hexd = self._blob(tree_id).name  # validates the form
        return self.root / "trees" / tree_id.removeprefix("sha256:")[:2] / (hexd + ".json")


def _hashed(f: BinaryIO, max_bytes: int, out: BinaryIO | None) -> tuple[str, int]:
    """The SHA-256 and size of `f` read in chunks (copied to `out` as read); NotKept
    past `max_bytes`."""
    h, size = hashlib.sha256(), 0
    while chunk := f.read(CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise NotKept(f"larger than the snapshot's file cap ({max_bytes} bytes)")
        h.update(chunk)
        if out is not None:
            out.write(chunk)
    return "sha256:" + h.hexdigest(), size
