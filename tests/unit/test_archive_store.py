"""The archive: segments read back as written or are refused naming why; a blob is
written whole (folder, and fsspec's memory file system); no run id names a path."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from agentledger.events.types import CODEC
from agentledger.services.adapters.archive import catalogue, segment
from agentledger.services.adapters.archive.archive import Archive, archive_url, open_cold_store
from agentledger.services.adapters.archive.folder import FolderStore
from agentledger.services.adapters.archive.port import ColdStore
from agentledger.services.adapters.archive.segment import Segment, SegmentError
from agentledger.services.errors import ConfigError
from tests.contracts.envelopes import finished


def _segment(run_id: str = "r-1") -> Segment:
    events = finished(run_id)
    return Segment(
        run_id, [CODEC.encode(e) for e in events], events[-1].id, {"e1:0": b"page"},
        "al:{rq1}:request:x", f"{run_id} digest", 123.0,
    )  # fmt: skip


def test_a_segment_reads_back_as_it_was_written() -> None:
    seg = _segment()
    assert segment.decode(segment.encode(seg)) == seg


@pytest.mark.parametrize("at", [0, 30, -1])
def test_a_damaged_segment_is_refused(at: int) -> None:
    data = bytearray(segment.encode(_segment()))
    data[at] ^= 0xFF
    with pytest.raises(SegmentError):
        segment.decode(bytes(data))


def test_a_cut_segment_is_refused() -> None:
    with pytest.raises(SegmentError, match="checksum"):
        segment.decode(segment.encode(_segment())[:-5])


@pytest.fixture(params=["folder", "memory"])
def cold(request: pytest.FixtureRequest, tmp_path: Path) -> ColdStore:
    if request.param == "folder":
        return open_cold_store(str(tmp_path / "archive"))
    pytest.importorskip("fsspec")  # the optional extra `archive`; the folder needs none
    return open_cold_store(f"memory://al-test-{os.getpid()}-{id(request)}")


def test_an_archive_keeps_a_run_under_a_name_no_run_id_chooses(cold: ColdStore) -> None:
    archive = Archive(cold, "al")
    hostile = "../../etc/passwd"
    seg = _segment(hostile)

    archive.write(seg)

    assert archive.read(hostile) == seg
    assert archive.holds(hostile) and not archive.holds("another")
    assert ".." not in archive.segment_name(hostile)
    assert archive.read("another") is None
    found = archive.events(hostile)
    assert found is not None and [e.run_id for e in found[1]] == [hostile] * len(seg.entries)


def test_a_rewrite_replaces_the_blob_whole(cold: ColdStore) -> None:
    cold.put("al/x/blob", b"one")
    cold.put("al/x/blob", b"two")
    assert cold.get("al/x/blob") == b"two"
    assert cold.get("al/x/none") is None


def test_a_request_tombstone_reads_back(cold: ColdStore) -> None:
    archive = Archive(cold, "al")
    archive.put_request("al:{rq12}:request:abc", "r-1 digest")
    assert archive.request("al:{rq12}:request:abc") == "r-1 digest"
    assert archive.request("al:{rq12}:request:other") is None


def test_a_segment_under_another_runs_name_is_refused(cold: ColdStore) -> None:
    archive = Archive(cold, "al")
    cold.put(archive.segment_name("r-2"), segment.encode(_segment("r-1")))
    with pytest.raises(SegmentError, match="holds run 'r-1'"):
        archive.read("r-2")


def test_the_folder_leaves_no_temporary_file(tmp_path: Path) -> None:
    store = FolderStore(str(tmp_path))
    store.put("a/b/c.seg", b"x" * 1000)
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["c.seg"]


@pytest.mark.parametrize("name", ["../x", "a//b", "/abs", "a/./b"])
def test_a_blob_name_that_leaves_the_store_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not a blob name"):
        FolderStore(str(tmp_path)).put(name, b"x")


def test_the_archive_is_the_state_folders_unless_set_and_off_is_none() -> None:
    assert archive_url(None, "/state") == "/state/archive"
    assert archive_url("s3://b/p", "/state") == "s3://b/p"
    assert archive_url("off", "/state") is None


def test_a_url_no_file_system_knows_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="AGENTLEDGER_ARCHIVE_URL"):
        open_cold_store("nosuchscheme://bucket/x")


def test_the_catalogue_names_a_run_by_its_creation_and_an_id_that_names_no_path() -> None:
    hostile = "../../etc/passwd"
    name = catalogue.entry_name("al", hostile, 1_796_554_522_143)
    assert ".." not in name and name.count("/") == 3
    assert catalogue.position_of(name.rsplit("/", 1)[1]) == (1_796_554_522_143.0, hostile)
    assert catalogue.position_of("junk") is None and catalogue.position_of("12_!!") is None


def test_an_archived_run_is_listed_and_the_catalogue_pages_newest_first_across_days(
    cold: ColdStore,
) -> None:
    archive = Archive(cold, "al")
    seg = _segment("r-1")
    archive.write(seg)
    (listed,), done = archive.runs_before((math.inf, ""), -math.inf, 5)
    assert listed[1] == "r-1" and done
    day = catalogue.DAY_MS
    for n, ms in enumerate([5 * day + 10, 5 * day + 20, 3 * day + 5, 1 * day]):
        cold.put(catalogue.entry_name("al", f"r-{n + 2}", ms), b"")
    newest, more = archive.runs_before((6 * day, ""), -math.inf, 2)
    assert [r for _, r in newest] == ["r-3", "r-2"] and not more
    older, done = archive.runs_before(newest[-1], -math.inf, 2)
    assert [r for _, r in older] == ["r-4", "r-5"] and done
    floored, done = archive.runs_before((6 * day, ""), 3 * day, 5)
    assert [r for _, r in floored] == ["r-3", "r-2", "r-4"] and done
