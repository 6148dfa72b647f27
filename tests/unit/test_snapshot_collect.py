"""Collecting the snapshot store (issue 39, retention): what no kept run refers to goes
once it is past the grace period; what a kept run refers to, and anything young (a
worker may not have recorded it yet), stays."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentledger.events.time_travel import snapshots_kept
from agentledger.services.adapters.snapshots.collect import GRACE_S, collect
from agentledger.services.adapters.snapshots.store import SnapshotStore
from agentledger.services.adapters.snapshots.taker import Caps, Snapshotter


def made(store: SnapshotStore) -> SnapshotStore:
    store.made()
    return store


CAPS = Caps(file_bytes=1 << 20, total_bytes=8 << 20, entries=10_000)


def _age(root: Path, by_s: float) -> None:
    then = time.time() - by_s
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def _two_snapshots(tmp_path: Path) -> tuple[SnapshotStore, str, str]:
    store = made(SnapshotStore(tmp_path / "snaps"))
    taker = Snapshotter(store, CAPS)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shared.txt").write_text("in both\n")
    (ws / "f.txt").write_text("one\n")
    first = taker.take(str(ws)).tree_id
    (ws / "f.txt").write_text("two, longer\n")
    second = taker.take(str(ws)).tree_id
    return store, first, second


def test_an_unreferenced_old_snapshot_and_its_own_blobs_are_freed(tmp_path: Path) -> None:
    store, first, second = _two_snapshots(tmp_path)
    _age(store.root, GRACE_S + 60)
    freed = collect(store, {second}, dry_run=False)
    assert (freed.trees, freed.blobs, freed.kept_trees, freed.kept_blobs) == (1, 1, 1, 2)
    assert freed.bytes > 0
    tree = store.tree(second)  # the kept one reads back whole, blobs and all
    assert store.blob(tree.entries["f.txt"].digest or "") == b"two, longer\n"
    assert store.blob(tree.entries["shared.txt"].digest or "") == b"in both\n"


def test_a_dry_run_counts_and_removes_nothing(tmp_path: Path) -> None:
    store, first, second = _two_snapshots(tmp_path)
    _age(store.root, GRACE_S + 60)
    freed = collect(store, set(), dry_run=True)
    assert (freed.trees, freed.blobs) == (2, 3)
    assert store.tree(first) and store.tree(second)


def test_young_snapshots_are_kept_though_no_run_refers_to_them_yet(tmp_path: Path) -> None:
    store, first, second = _two_snapshots(tmp_path)
    freed = collect(store, set(), dry_run=False)
    assert (freed.trees, freed.blobs, freed.kept_trees) == (0, 0, 2)


def test_a_tree_stored_again_is_young_again(tmp_path: Path) -> None:
    store, first, _ = _two_snapshots(tmp_path)
    _age(store.root, GRACE_S + 60)
    store.put_tree(store.tree(first))  # a new snapshot of the same workspace, not recorded yet
    freed = collect(store, set(), dry_run=False)
    assert store.tree(first) and freed.trees == 1


def test_a_runs_snapshots_are_kept_while_it_may_go_on_and_for_their_age_after() -> None:
    assert snapshots_kept(over=False, ended_at=0.0, now=1e9, keep_s=10)
    assert snapshots_kept(over=True, ended_at=100.0, now=105.0, keep_s=10)
    assert not snapshots_kept(over=True, ended_at=100.0, now=110.0, keep_s=10)
    assert snapshots_kept(over=True, ended_at=0.0, now=1e9, keep_s=0)
