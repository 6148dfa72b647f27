"""Snapshots taken over from the last walk where inotify saw no event (issue 39, the
cost of a write call): every snapshot of a watched taker equals a fresh taker's walk
of the same folder, whatever happened in between — in-place rewrites of the same size
at once, folders added, removed, renamed and replaced, links swapped — and a folder
without an event is not listed again. Where the kernel cannot tell (a network file
system) every folder counts as changed."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from agentledger.services.adapters.snapshots import watch
from agentledger.services.adapters.snapshots.store import SnapshotStore
from agentledger.services.adapters.snapshots.taker import Caps, Snapshotter

CAPS = Caps(file_bytes=1 << 20, total_bytes=8 << 20, entries=10_000)
pytestmark = pytest.mark.skipif(not watch.Watcher().on, reason="no inotify on this system")


def fresh(store: SnapshotStore, ws: Path) -> str:
    """The oracle: a taker that remembers nothing walks every file."""
    return Snapshotter(store, CAPS).take(str(ws)).tree_id


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    for d in ("a", "b", "a/deep"):
        (ws / d).mkdir(parents=True)
        for i in range(3):
            (ws / d / f"f{i}.txt").write_text(f"{d}{i}")
    return ws


def test_a_same_size_rewrite_at_once_in_an_unlisted_folder_is_seen(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    taker = Snapshotter(SnapshotStore(tmp_path / "s"), CAPS)
    first = taker.take(str(ws)).tree_id
    assert taker.take(str(ws)).tree_id == first
    (ws / "a" / "deep" / "f1.txt").write_text("XXXXXXX"[: len("a/deep1")])  # same size
    assert taker.take(str(ws)).tree_id == fresh(taker.store, ws) != first


def test_every_snapshot_equals_a_full_walk_whatever_happened(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    taker = Snapshotter(SnapshotStore(tmp_path / "s"), CAPS)
    rng = random.Random(39)
    taker.take(str(ws))
    for step in range(120):
        _mutate(ws, rng, step)
        assert taker.take(str(ws)).tree_id == fresh(taker.store, ws), step


def _mutate(ws: Path, rng: random.Random, step: int) -> None:
    folders = [p for p in ws.rglob("*") if p.is_dir() and not p.is_symlink()] + [ws]
    files = [p for p in ws.rglob("*") if p.is_file() and not p.is_symlink()]
    where = rng.choice(folders)
    match rng.randrange(7):
        case 0 if files:
            f = rng.choice(files)
            f.write_bytes(bytes(len(f.read_bytes())))  # same size, same tick
        case 1:
            (where / f"n{step}.txt").write_text(str(step))
        case 2 if files:
            rng.choice(files).unlink()
        case 3 if where != ws:
            shutil.rmtree(where)
            where.mkdir()
            (where / "again.txt").write_text(str(step))  # replaced by another folder
        case 4 if where != ws:
            where.rename(ws / f"moved{step}")
        case 5:
            (where / f"sub{step}").mkdir()
            (where / f"sub{step}" / "x").write_text("x")
        case _:
            link = where / "link"
            link.unlink(missing_ok=True)
            os.symlink(f"/etc/{step}", link)


def test_an_unchanged_folder_is_not_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _workspace(tmp_path)
    taker = Snapshotter(SnapshotStore(tmp_path / "s"), CAPS)
    taker.take(str(ws))
    listed: list[str] = []
    real = os.scandir

    def counting(path: str) -> object:
        listed.append(os.path.relpath(path, ws))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    (ws / "b" / "f0.txt").write_text("changed")
    taker.take(str(ws))
    assert listed == ["b"]
    listed.clear()
    taker.take(str(ws))
    assert listed == []


def test_a_workspace_on_a_network_file_system_is_walked_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "_fs_type", lambda path: 0x6969)  # NFS
    w = watch.Watcher()
    assert w.since(str(tmp_path), w.mark()).everything
    assert not w.watch(str(tmp_path), str(tmp_path), "")  # no watch slot spent on it


def test_a_workspace_no_longer_remembered_loses_its_watches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentledger.services.adapters.snapshots import taker as taker_module

    monkeypatch.setattr(taker_module, "REMEMBERED_WORKSPACES", 1)
    first, second = _workspace(tmp_path / "one"), _workspace(tmp_path / "two")
    taker = Snapshotter(SnapshotStore(tmp_path / "s"), CAPS)
    taker.take(str(first))
    watcher = taker._watcher
    assert watcher is not None and len(watcher._where) == 4  # its top and 3 folders
    taker.take(str(second))
    assert {ws for where in watcher._where.values() for ws in where} == {str(second)}
    (first / "a" / "f0.txt").write_text("changed while forgotten")
    assert taker.take(str(first)).tree_id == fresh(taker.store, first)


def test_too_many_events_between_two_snapshots_mean_a_whole_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_EVENTS", 3)
    ws = _workspace(tmp_path)
    taker = Snapshotter(SnapshotStore(tmp_path / "s"), CAPS)
    taker.take(str(ws))
    for i in range(5):
        (ws / "b" / f"new{i}.txt").write_text(str(i))
    w = taker._watcher
    assert w is not None
    w.mark()
    assert w.since(str(ws), taker._last[str(ws)].seq).everything
    assert taker.take(str(ws)).tree_id == fresh(taker.store, ws)
