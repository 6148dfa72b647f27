"""`checkout`'s writer (issue 39): the workspace a tree describes, written into an empty
folder only, and never outside it, whatever a (tampered) tree says."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentledger.events.event_model import Snapshots
from agentledger.events.time_travel import Written, before_turn
from agentledger.events.workspace_tree import Entry, Tree
from agentledger.services.adapters.snapshots.checkout import CheckoutRefused, write_tree
from agentledger.services.adapters.snapshots.store import SnapshotStore
from agentledger.services.adapters.snapshots.taker import Caps, Snapshotter


def made(store: SnapshotStore) -> SnapshotStore:
    store.made()
    return store


CAPS = Caps(file_bytes=1 << 20, total_bytes=8 << 20, entries=10_000)


def _store_with(tmp_path: Path, data: bytes) -> tuple[SnapshotStore, str]:
    store = made(SnapshotStore(tmp_path / "snaps"))
    src = tmp_path / "src"
    src.write_bytes(data)
    digest, _ = store.put_file(str(src), 1 << 20)
    return store, digest


def test_a_taken_workspace_comes_back_byte_for_byte_with_its_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg" / "sub").mkdir(parents=True)
    (ws / "a.py").write_bytes(b"print(1)\n")
    (ws / "pkg" / "sub" / "b.bin").write_bytes(bytes(range(256)))
    (ws / "pkg" / "link").symlink_to("sub/b.bin")
    store = made(SnapshotStore(tmp_path / "snaps"))
    tree = store.tree(Snapshotter(store, CAPS).take(str(ws)).tree_id)
    out = tmp_path / "out"
    assert write_tree(store, tree, str(out)) == []
    assert (out / "a.py").read_bytes() == b"print(1)\n"
    assert (out / "pkg" / "sub" / "b.bin").read_bytes() == bytes(range(256))
    assert (out / "pkg" / "link").readlink() == Path("sub/b.bin")


@pytest.mark.parametrize("path", ["../escape", "/etc/escape", "a/../../escape", "a//b", "./a"])
def test_a_tree_naming_a_path_outside_its_folder_is_refused(tmp_path: Path, path: str) -> None:
    store, digest = _store_with(tmp_path, b"x")
    tree = Tree({path: Entry("file", digest, 1)})
    with pytest.raises(CheckoutRefused, match="outside its folder"):
        write_tree(store, tree, str(tmp_path / "out"))
    assert not (tmp_path / "escape").exists()


def test_a_file_under_a_link_is_refused_so_a_link_cannot_lead_out(tmp_path: Path) -> None:
    store, digest = _store_with(tmp_path, b"pwned")
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = Tree({"a": Entry("link", target=str(outside)), "a/f": Entry("file", digest, 5)})
    with pytest.raises(CheckoutRefused, match="under an entry that is not a folder"):
        write_tree(store, tree, str(tmp_path / "out"))
    assert list(outside.iterdir()) == []


def test_a_folder_that_is_not_empty_or_is_a_link_is_refused(tmp_path: Path) -> None:
    store, digest = _store_with(tmp_path, b"x")
    tree = Tree({"f": Entry("file", digest, 1)})
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine").write_text("mine")
    with pytest.raises(CheckoutRefused, match="is not empty"):
        write_tree(store, tree, str(busy))
    (tmp_path / "via").symlink_to(tmp_path / "empty-elsewhere", target_is_directory=True)
    with pytest.raises(CheckoutRefused, match="is a link"):
        write_tree(store, tree, str(tmp_path / "via"))


def test_entries_left_out_are_named_not_written(tmp_path: Path) -> None:
    store, digest = _store_with(tmp_path, b"x")
    tree = Tree(
        {"big": Entry("skipped", size=9, note="past the file cap"), "f": Entry("file", digest, 1)}
    )
    assert write_tree(store, tree, str(tmp_path / "out")) == ["big"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["f"]


def test_before_a_turn_is_the_first_later_writes_before_or_the_last_writes_after() -> None:
    w = lambda c, t, b, a: Written(c, t, "write_file", Snapshots(before=b, after=a))  # noqa: E731
    calls = [w("w1", 3, "s0", "s1"), w("w2", 5, "s2", "s3")]
    assert before_turn(calls, 1) == "s0"
    assert before_turn(calls, 4) == "s2"
    assert before_turn(calls, 6) == "s3"
    assert before_turn([], 1) is None


def test_a_damaged_blob_fails_the_checkout_by_name(tmp_path: Path) -> None:
    from agentledger.services.adapters.snapshots.store import SnapshotMissing

    store, digest = _store_with(tmp_path, b"original")
    blob = next(p for p in (tmp_path / "snaps" / "blobs").rglob("*") if p.is_file())
    blob.write_bytes(b"tampered")
    with pytest.raises(SnapshotMissing, match="damaged"):
        write_tree(store, Tree({"f": Entry("file", digest, 8)}), str(tmp_path / "out"))


def test_checks_with_snapshots_are_listed_where_they_were_recorded_with_their_verdict() -> None:
    from agentledger.events.acceptance_events import AcceptanceChecked, AcceptanceStarted
    from agentledger.events.call_events import ToolCallProposed, ToolCallSucceeded
    from agentledger.events.event_model import Snapshots
    from agentledger.events.time_travel import written

    pair = Snapshots(before="sha256:" + "1" * 64, after="sha256:" + "2" * 64)
    events = [
        ToolCallProposed(call_id="w1", turn=2, name="write_file", input={}),
        ToolCallSucceeded(call_id="w1", output=None, started_at=0, finished_at=1, snapshots=pair),
        AcceptanceStarted(attempt=2, deadline_at=1.0),
        AcceptanceChecked(
            index=0, check="c", passed=False, evidence={}, checked_at=1.0, snapshots=pair
        ),  # fmt: skip
        AcceptanceChecked(index=1, check="d", passed=True, evidence={}, checked_at=1.0),
    ]
    found = written(events)
    assert [(w.call_id, w.turn, w.passed) for w in found] == [
        ("w1", 2, None),
        ("check-2.1", 2, False),
    ]
