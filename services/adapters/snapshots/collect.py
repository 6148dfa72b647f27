"""Collecting the snapshot store (`agentledger gc`): a tree is kept while a run that is
kept refers to it, or while it is younger than GRACE_S (a worker may have stored it
and not yet recorded its call's outcome); a blob is kept while a kept tree names it,
or while it is younger than GRACE_S. Everything else is removed, and counted.
Temporary files older than GRACE_S (a worker killed mid-copy) go too."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentledger.services.adapters.snapshots.store import SnapshotMissing, SnapshotStore

GRACE_S = 3600.0


@dataclass(frozen=True, slots=True)
class Freed:
    trees: int
    blobs: int
    bytes: int
    kept_trees: int
    kept_blobs: int


def _files(folder: Path) -> Iterator[tuple[Path, os.stat_result]]:
    for sub in sorted(folder.iterdir()) if folder.is_dir() else ():
        for f in sorted(sub.iterdir()) if sub.is_dir() else [sub]:
            yield f, f.lstat()


def collect(store: SnapshotStore, referenced: set[str], *, dry_run: bool) -> Freed:
    """Remove what `referenced` (tree ids of kept runs) does not keep."""
    young = time.time() - GRACE_S
    root = store.root
    kept_trees: set[str] = set()
    digests: set[str] = set()
    freed_trees = freed_bytes = 0
    for path, st in _files(root / "trees"):
        tid = "sha256:" + path.parent.name + path.name.removesuffix(".json")
        if tid in referenced or st.st_mtime > young:
            kept_trees.add(tid)
            try:
                digests.update(e.digest for e in store.tree(tid).entries.values() if e.digest)
            except SnapshotMissing:
                pass  # damaged: its blobs are not kept for it
            continue
        freed_trees, freed_bytes = freed_trees + 1, freed_bytes + st.st_size
        _remove(path, dry_run)
    freed_blobs = kept_blobs = 0
    for path, st in _files(root / "blobs"):
        if "sha256:" + path.parent.name + path.name in digests or st.st_mtime > young:
            kept_blobs += 1
            continue
        freed_blobs, freed_bytes = freed_blobs + 1, freed_bytes + st.st_size
        _remove(path, dry_run)
    for path, st in _files(root / "tmp"):
        if st.st_mtime <= young:
            freed_bytes += st.st_size
            _remove(path, dry_run)
    return Freed(freed_trees, freed_blobs, freed_bytes, len(kept_trees), kept_blobs)


def _remove(path: Path, dry_run: bool) -> None:
    if not dry_run:
        path.unlink(missing_ok=True)
