"""Workspace snapshots (issue 39, item 1): the pure tree and its diff, and the taker
over a real folder — deduplicated blobs, incremental walks, and a hostile workspace
(a link out to the host, a FIFO, a huge file, odd bytes in a name)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentledger.events.workspace_tree import (
    Entry,
    Tree,
    TreeTextInvalid,
    changes,
    tree_from_text,
    unified,
    writes_files,
)
from agentledger.services.adapters.snapshots.store import SnapshotMissing, SnapshotStore
from agentledger.services.adapters.snapshots.taker import RACY_NS, Caps, Snapshotter


def made(store: SnapshotStore) -> SnapshotStore:
    store.made()
    return store


CAPS = Caps(file_bytes=1 << 20, total_bytes=8 << 20, entries=10_000)


class CountingStore(SnapshotStore):
    reads: int = 0

    def put_file(self, path: str, max_bytes: int) -> tuple[str, int]:
        object.__setattr__(self, "reads", self.reads + 1)
        return super().put_file(path, max_bytes)


def _settled() -> None:
    """File times are coarse: files younger than RACY_NS are read again (by design)."""
    time.sleep(RACY_NS / 1e9 + 0.05)


def test_a_tree_id_depends_on_content_only_and_its_text_reads_back() -> None:
    a = Tree({"b.txt": Entry("file", "sha256:" + "1" * 64, 3), "a": Entry("link", target="x")})
    b = Tree({"a": Entry("link", target="x"), "b.txt": Entry("file", "sha256:" + "1" * 64, 3)})
    assert a.id == b.id and a.id.startswith("sha256:")
    assert tree_from_text(a.canonical()) == a
    with pytest.raises(TreeTextInvalid, match="not a workspace tree"):
        tree_from_text("[1]")


def test_changes_name_added_removed_and_modified_paths_in_order() -> None:
    f = lambda d: Entry("file", "sha256:" + d * 64, 1)  # noqa: E731
    before = Tree({"a": f("1"), "b": f("2"), "c": f("3")})
    after = Tree({"a": f("1"), "b": f("4"), "d": f("5")})
    assert [(c.path, c.kind) for c in changes(before, after)] == [
        ("b", "modified"), ("c", "removed"), ("d", "added"),
    ]  # fmt: skip


def test_a_unified_diff_shows_the_lines_changed_and_binary_in_one_line() -> None:
    before = Tree({"calc.py": Entry("file", "sha256:" + "1" * 64, 4)})
    after = Tree({"calc.py": Entry("file", "sha256:" + "2" * 64, 4)})
    (change,) = changes(before, after)
    text = unified(change, b"x = 1\ny = 2\n", b"x = 1\ny = 3\n")
    assert text.startswith("--- a/calc.py\n+++ b/calc.py\n@@")
    assert "-y = 2\n+y = 3\n" in text
    assert unified(change, b"\0\1", b"\0\2").endswith("binary files differ\n")


def test_only_calls_that_write_files_are_snapshotted() -> None:
    assert writes_files(False, ("file:ws/calc.py",))
    assert not writes_files(True, ("file:ws/calc.py",))
    assert not writes_files(False, ("stock:A1",))


def test_the_same_content_is_one_blob_across_workspaces_and_snapshots(tmp_path: Path) -> None:
    store = made(SnapshotStore(tmp_path / "snaps"))
    taker = Snapshotter(store, CAPS)
    for name in ("one", "two"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "same.txt").write_text("same content\n")
    first = taker.take(str(tmp_path / "one"))
    second = taker.take(str(tmp_path / "two"))
    assert first.tree_id == second.tree_id  # the same files: the same tree
    blobs = [p for p in (tmp_path / "snaps" / "blobs").rglob("*") if p.is_file()]
    assert len(blobs) == 1
    tree = store.tree(first.tree_id)
    assert store.blob(tree.entries["sub/same.txt"].digest or "") == b"same content\n"


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tmp_path: Path) -> None:
    store = made(CountingStore(tmp_path / "snaps"))
    taker = Snapshotter(store, CAPS)
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(20):
        (ws / f"f{i}.txt").write_text(f"file {i}\n")
    _settled()
    before = taker.take(str(ws))
    assert store.reads == 20
    (ws / "f3.txt").write_text("changed\n")
    after = taker.take(str(ws))
    assert store.reads == 21  # only the written file
    assert [c.path for c in changes(store.tree(before.tree_id), store.tree(after.tree_id))] == [
        "f3.txt"
    ]


def test_a_same_size_rewrite_right_after_a_snapshot_is_not_missed(tmp_path: Path) -> None:
    store = made(SnapshotStore(tmp_path / "snaps"))
    taker = Snapshotter(store, CAPS)
    ws = tmp_path / "ws"
    ws.mkdir()
    target = ws / "a.txt"
    target.write_text("aaaa")
    first = taker.take(str(ws))
    with open(target, "r+") as f:  # in place, same size, same inode, within a clock tick
        f.write("bbbb")
    second = taker.take(str(ws))
    assert first.tree_id != second.tree_id


def test_a_link_out_of_the_workspace_is_recorded_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("the host's secret\n")
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "leak").symlink_to(secret)
    (ws / "d" / "up").symlink_to(tmp_path)  # a folder link: never walked into
    store = made(SnapshotStore(tmp_path / "snaps"))
    taken = Snapshotter(store, CAPS).take(str(ws))
    tree = store.tree(taken.tree_id)
    assert tree.entries["leak"] == Entry("link", target=str(secret))
    assert tree.entries["d/up"] == Entry("link", target=str(tmp_path))
    assert not any("host-secret" in p for p in tree.entries)
    for blob in (tmp_path / "snaps" / "blobs").rglob("*"):
        assert not blob.is_file() or b"secret" not in blob.read_bytes()


def test_a_fifo_and_a_file_past_the_cap_are_left_out_with_a_note(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "pipe")  # opening it to read would block forever
    with open(ws / "huge.bin", "wb") as f:
        f.truncate(5 << 20)  # sparse: 5 MB past a 1 MB cap, no disk used
    (ws / "ok.txt").write_text("ok\n")
    store = made(SnapshotStore(tmp_path / "snaps"))
    taken = Snapshotter(store, CAPS).take(str(ws))
    tree = store.tree(taken.tree_id)
    assert tree.entries["pipe"].kind == "skipped"
    assert tree.entries["huge.bin"] == Entry("skipped", size=5 << 20, note="past the file cap")
    assert tree.entries["ok.txt"].kind == "file"
    assert taken.note == f"files larger than {1 << 20} bytes left out"


def test_the_total_cap_leaves_out_the_files_past_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(4):
        (ws / f"f{i}").write_bytes(bytes([i]) * 400)
    store = made(SnapshotStore(tmp_path / "snaps"))
    taken = Snapshotter(store, Caps(file_bytes=1000, total_bytes=1000, entries=100)).take(str(ws))
    kinds = [e.kind for _, e in sorted(store.tree(taken.tree_id).entries.items())]
    assert kinds == ["file", "file", "skipped", "skipped"]
    assert taken.note == "files past 1000 bytes in all left out"


def test_a_name_with_odd_bytes_round_trips_through_the_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    odd = os.fsdecode(b"bad\xff\x1bname")
    with open(os.path.join(str(ws), odd), "wb") as f:
        f.write(b"x")
    store = made(SnapshotStore(tmp_path / "snaps"))
    taken = Snapshotter(store, CAPS).take(str(ws))
    assert list(store.tree(taken.tree_id).entries) == [odd]


def test_a_damaged_or_missing_blob_or_tree_is_named(tmp_path: Path) -> None:
    store = made(SnapshotStore(tmp_path / "snaps"))
    with pytest.raises(SnapshotMissing, match="not in the snapshot store"):
        store.tree("sha256:" + "0" * 64)
    with pytest.raises(SnapshotMissing, match="is not a sha256 digest"):
        store.blob("sha256:../../etc/passwd")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("a")
    taken = Snapshotter(store, CAPS).take(str(ws))
    digest = store.tree(taken.tree_id).entries["a"].digest or ""
    blob = next(p for p in (tmp_path / "snaps" / "blobs").rglob("*") if p.is_file())
    blob.write_text("tampered")
    with pytest.raises(SnapshotMissing, match="damaged"):
        store.blob(digest)


def test_a_trees_fast_text_is_the_canonical_json_text() -> None:
    import json

    tree = Tree(
        {
            os.fsdecode(b"z\xff"): Entry("file", "sha256:" + "1" * 64, 3),
            "a b": Entry("link", target="é"),
        },
        ("a note",),
    )
    body = {
        "v": 1,
        "entries": {p: tree.entries[p].as_dict() for p in tree.entries},
        "notes": ["a note"],
    }
    assert tree.canonical() == json.dumps(body, sort_keys=True, separators=(",", ":"))


def test_a_write_calls_outcome_carries_its_snapshots_and_a_read_calls_none(tmp_path: Path) -> None:
    from types import SimpleNamespace
    from typing import Any

    from agentledger.events.tool_step import Errored, Succeeded
    from agentledger.events.types import ToolError
    from agentledger.services.handlers.snapshotting import around

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("old\n")
    store = made(SnapshotStore(tmp_path / "snaps"))
    taker = Snapshotter(store, CAPS)
    state: Any = SimpleNamespace(workspace=str(ws))
    write: Any = SimpleNamespace(read_only=False, writes=("file:ws/calc.py",))
    read: Any = SimpleNamespace(read_only=True, writes=())

    def writing() -> Succeeded:
        (ws / "calc.py").write_text("new\n")
        return Succeeded({"ok": True})

    done = around(taker, state, write, writing)
    assert isinstance(done, Succeeded) and done.snapshots is not None
    (change,) = changes(store.tree(done.snapshots.before), store.tree(done.snapshots.after))
    assert change.path == "calc.py" and change.kind == "modified"
    failed = around(
        taker,
        state,
        write,
        lambda: Errored(ToolError(code="internal", message="no", retryable=False)),
    )
    assert isinstance(failed, Errored) and failed.snapshots is not None
    assert failed.snapshots.before == failed.snapshots.after  # it changed nothing
    assert around(taker, state, read, lambda: Succeeded(1)) == Succeeded(1)
    assert around(None, state, write, lambda: Succeeded(1)) == Succeeded(1)  # snapshots off


def test_a_file_too_large_to_diff_is_described_by_its_size() -> None:
    from agentledger.events.workspace_tree import MAX_DIFF_BYTES

    big = MAX_DIFF_BYTES + 1
    before = Tree({"big.log": Entry("file", "sha256:" + "1" * 64, big)})
    after = Tree({"big.log": Entry("file", "sha256:" + "2" * 64, big)})
    (change,) = changes(before, after)
    assert unified(change, None, None).endswith(f"too large to diff ({big} bytes before)\n")


def test_the_store_is_made_on_the_first_snapshot_never_before(tmp_path: Path) -> None:
    root = tmp_path / "state" / "snapshots"
    taker = Snapshotter(SnapshotStore(root), CAPS)
    with pytest.raises(SnapshotMissing):
        taker.store.tree("sha256:" + "0" * 64)  # reading makes nothing
    assert not root.exists()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("a")
    taker.take(str(ws))
    assert sorted(p.name for p in root.iterdir()) == ["blobs", "tmp", "trees"]
