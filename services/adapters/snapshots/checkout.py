"""Writing a snapshot's tree into a folder (`agentledger checkout`): the folder must be
absent or empty; every path is checked first (relative, no `.`/`..`/empty component,
no NUL, no entry that is also another's folder), then written from the folder's own
descriptor one component at a time without following a link, each file created new
(O_EXCL), links last — so nothing is ever written outside the folder, whatever the
tree says. Entries the snapshot left out are not written; their paths are returned."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from agentledger.events.workspace_tree import Tree, printable
from agentledger.services.adapters.snapshots.store import SnapshotStore

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class CheckoutRefused(ValueError):
    """The folder or the tree is not fit to write (names what is wrong)."""


def write_tree(store: SnapshotStore, tree: Tree, folder: str) -> list[str]:
    """Write `tree` into `folder`; the paths left out of the snapshot (not written)."""
    _check_paths(tree)
    root = _empty_folder(Path(folder))
    left_out: list[str] = []
    with _opened(os.open(root, _DIR)) as top:
        for path in sorted(tree.entries):
            entry = tree.entries[path]
            if entry.kind == "skipped":
                left_out.append(path)
            elif entry.kind == "file" and entry.digest is not None:
                *parents, name = path.split("/")
                with _folder(top, parents) as fd:
                    _write_new(fd, name, store, entry.digest)
        for path in sorted(p for p, e in tree.entries.items() if e.kind == "link"):
            *parents, name = path.split("/")
            with _folder(top, parents) as fd:
                os.symlink(tree.entries[path].target or "", name, dir_fd=fd)
    return left_out


def _check_paths(tree: Tree) -> None:
    for path in tree.entries:
        parts = path.split("/")
        if path.startswith("/") or any(p in ("", ".", "..") or "\0" in p for p in parts):
            raise CheckoutRefused(
                f"the snapshot names a path outside its folder: {printable(path)!r}"
            )
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in tree.entries:
                raise CheckoutRefused(
                    f"the snapshot names {printable(path)!r} under an entry that is not a folder"
                )


def _empty_folder(root: Path) -> Path:
    if root.is_symlink():
        raise CheckoutRefused(f"{str(root)!r} is a link: name a folder")
    if root.exists():
        if not root.is_dir():
            raise CheckoutRefused(f"{str(root)!r} is not a folder")
        if any(root.iterdir()):
            raise CheckoutRefused(
                f"{str(root)!r} is not empty: checkout writes only into an empty folder"
            )
        return root
    try:
        root.mkdir(mode=0o755)
    except OSError as e:
        raise CheckoutRefused(f"cannot make {str(root)!r}: {e.strerror}") from None
    return root


@contextlib.contextmanager
def _opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _folder(top: int, parents: list[str]) -> Iterator[int]:
    """The folder `parents` under `top`, made as needed, opened without following a link."""
    fd = os.dup(top)
    try:
        for name in parents:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fd)
            inner = os.open(name, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _write_new(fd: int, name: str, store: SnapshotStore, digest: str) -> None:
    out = os.open(name, _NEW, 0o644, dir_fd=fd)
    with os.fdopen(out, "wb") as f:
        store.copy_blob(digest, f)
