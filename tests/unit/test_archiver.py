"""The archiver on the memory store: a finished run past its age is archived, then
removed; a crash after any step leaves it whole in the store, or archived and whole,
or archived and gone, and a second pass finishes it; every read reads it back the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger.events.retention import RetentionPolicy
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.archive.archive import Archive, open_cold_store
from agentledger.services.adapters.reading.archived import ArchivedReader, ArchivedStore
from agentledger.services.adapters.reading.memory_reader import MemoryRunReader
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.store.port import Head
from agentledger.services.adapters.store.request_keys import MemoryRequestKeys
from agentledger.services.handlers.archiver import (
    STEPS,
    Outcome,
    archive_run,
    due_now,
    retention_pass,
)
from agentledger.services.handlers.state_cache import StateCache
from tests.contracts.envelopes import T0, batch, finished

DAY = 86400.0
NOW = T0 + 30 * DAY


class Crash(Exception):
    pass


def _world(tmp_path: Path) -> tuple[MemoryEventStore, Archive, MemoryRequestKeys]:
    return (
        MemoryEventStore(),
        Archive(open_cold_store(str(tmp_path / "a")), "al"),
        MemoryRequestKeys(),
    )


def _finished(
    store: MemoryEventStore, keys: MemoryRequestKeys, run_id: str, *, at: float = T0
) -> list[Envelope[Any]]:
    events = finished(run_id, at=at)
    data = events[0].data.model_copy(update={"publisher": "pub", "request_id": "req-" + run_id})
    events[0] = events[0].model_copy(update={"data": data})
    store.append(run_id, events, expected_seq=0, live=False)
    keys.claim("pub", "req-" + run_id, f"{run_id} digest")
    return events


def _crash_at(step: str) -> Any:
    def fault(at: str, _run: str) -> None:
        if at == step:
            raise Crash(step)

    return fault


def _reads(store: MemoryEventStore, archive: Archive, run_id: str) -> tuple[Any, ...]:
    reader = ArchivedReader(MemoryRunReader(store), archive)
    view = ArchivedStore(store, archive)
    state = StateCache(view).load(run_id)  # type: ignore[arg-type]
    return (
        reader.exists(run_id), reader.read(run_id), reader.read(run_id, after_seq=2),
        [(r.entry_id, r.envelope) for r in reader.raw(run_id)], view.read(run_id),
        state.status if state else None, state.seq if state else None,
    )  # fmt: skip


def test_a_finished_run_past_its_age_is_archived_then_gone_from_the_store(tmp_path: Path) -> None:
    store, archive, keys = _world(tmp_path)
    events = _finished(store, keys, "r-1")
    before = _reads(store, archive, "r-1")

    report = retention_pass(store, archive, keys, RetentionPolicy(7 * DAY), now=NOW)

    assert (report.due, report.archived, report.failed) == (["r-1"], ["r-1"], [])
    assert store.read("r-1") == [] and store.export("r-1") is None
    assert keys.held == {}
    assert archive.request(keys.name("pub", "req-r-1")) == "r-1 digest"
    assert _reads(store, archive, "r-1") == before
    assert before[1] == events


def test_a_live_run_and_a_run_younger_than_its_age_stay(tmp_path: Path) -> None:
    store, archive, keys = _world(tmp_path)
    _finished(store, keys, "young", at=NOW - DAY)
    store.append("live", batch("live", 1, 3), expected_seq=0, live=True)

    report = retention_pass(store, archive, keys, RetentionPolicy(7 * DAY), now=NOW)

    assert report.due == []
    assert len(store.read("young")) > 0 and len(store.read("live")) == 3


def test_a_dry_run_names_the_due_runs_and_changes_nothing(tmp_path: Path) -> None:
    store, archive, keys = _world(tmp_path)
    events = _finished(store, keys, "r-1")

    report = retention_pass(store, archive, keys, RetentionPolicy(7 * DAY), now=NOW, dry_run=True)

    assert report.due == ["r-1"] and report.archived == []
    assert store.read("r-1") == events and archive.read("r-1") is None


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_after_any_step_leaves_the_run_whole_and_a_second_pass_finishes(
    tmp_path: Path, step: str
) -> None:
    store, archive, keys = _world(tmp_path)
    _finished(store, keys, "r-1")
    before = _reads(store, archive, "r-1")

    with pytest.raises(Crash):
        archive_run(store, archive, keys, "r-1", now=NOW, fault=_crash_at(step))

    in_store = store.export("r-1") is not None
    archived = archive.read("r-1") is not None
    assert in_store or archived  # never half: whole in the store, or archived
    assert _reads(store, archive, "r-1") == before
    outcome = archive_run(store, archive, keys, "r-1", now=NOW)
    assert outcome is (Outcome.ALREADY if step == "removed" else Outcome.ARCHIVED)
    assert store.export("r-1") is None and keys.held == {}
    assert _reads(store, archive, "r-1") == before


def test_a_second_pass_writes_nothing_again(tmp_path: Path) -> None:
    store, archive, keys = _world(tmp_path)
    _finished(store, keys, "r-1")
    archive_run(store, archive, keys, "r-1", now=NOW)
    segment = tmp_path / "a" / archive.segment_name("r-1")
    written = segment.stat().st_mtime_ns

    assert archive_run(store, archive, keys, "r-1", now=NOW) is Outcome.ALREADY
    assert retention_pass(store, archive, keys, RetentionPolicy(0.0), now=NOW).due == []
    assert segment.stat().st_mtime_ns == written


def test_a_damaged_archive_is_never_trusted_the_run_is_written_again(tmp_path: Path) -> None:
    store, archive, keys = _world(tmp_path)
    events = _finished(store, keys, "r-1")
    with pytest.raises(Crash):
        archive_run(store, archive, keys, "r-1", now=NOW, fault=_crash_at("written"))
    path = tmp_path / "a" / archive.segment_name("r-1")
    path.write_bytes(path.read_bytes()[:-3])  # the disk lost its end

    assert archive_run(store, archive, keys, "r-1", now=NOW) is Outcome.ARCHIVED
    found = archive.events("r-1")
    assert found is not None and found[1] == events


def test_a_request_key_naming_another_run_is_left_alone(tmp_path: Path) -> None:
    store, archive, keys = _world(tmp_path)
    _finished(store, keys, "r-1")
    keys.held[keys.name("pub", "req-r-1")] = "r-other digest"

    assert archive_run(store, archive, keys, "r-1", now=NOW) is Outcome.ARCHIVED
    assert keys.held == {keys.name("pub", "req-r-1"): "r-other digest"}
    assert archive.request(keys.name("pub", "req-r-1")) is None


def test_the_due_runs_are_found_across_pages_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentledger.services.handlers import archiver

    monkeypatch.setattr(archiver, "PAGE", 3)
    store, _archive, keys = _world(tmp_path)
    ids = [f"r-{n:02}" for n in range(8)]
    for n, run_id in enumerate(ids):
        _finished(store, keys, run_id, at=T0 + n)

    assert due_now(store, RetentionPolicy(7 * DAY), now=NOW) == ids


def test_reading_an_archived_run_leaves_no_snapshot_behind(tmp_path: Path) -> None:
    from agentledger.services.adapters.store.port import Snapshot

    store, archive, keys = _world(tmp_path)
    events = _finished(store, keys, "r-1")
    archive_run(store, archive, keys, "r-1", now=NOW)
    view = ArchivedStore(store, archive)

    view.save_snapshot("r-1", Snapshot(len(events), events[-1].id, "v", b"state"))

    assert store.snapshot_pages("r-1", 0) == [] and store.export("r-1") is None
    assert store.read_tails([Head("r-1")], snapshot_version="v")[0].snapshot_seq == 0


def test_a_run_archived_to_an_fsspec_url_reads_back_the_same(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    store, keys = MemoryEventStore(), MemoryRequestKeys()
    archive = Archive(open_cold_store(f"memory://retention-{tmp_path.name}"), "al")
    _finished(store, keys, "r-1")
    before = _reads(store, archive, "r-1")

    report = retention_pass(store, archive, keys, RetentionPolicy(7 * DAY), now=NOW)

    assert report.archived == ["r-1"] and store.export("r-1") is None
    assert _reads(store, archive, "r-1") == before
