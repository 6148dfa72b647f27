"""Retention, done: a finished run past its age (`agentledger.events.retention`) is
written to the archive and then taken out of Redis. Each run goes through the
same steps, and a crash between any two leaves it whole in Redis, or archived
and whole in Redis, or archived and gone — never half:

1. export its log and overflow pages from the store;
2. write its segment (atomically: `agentledger.services.adapters.archive`), unless
   the archive holds that very log already (a second pass writes nothing);
3. read the segment back and verify it: checksum, every event decoding at its seq,
   the same entries and pages as exported, the same count and last event id;
4. file the tombstone of its request id (what the request key held) and read it back;
5. delete the request key (only while it still names this run): a duplicate of
   the request is answered from the tombstone from here on;
6. remove the run — log, snapshot, overflow pages, index entries — in one atomic
   step that checks the log is still the one verified (`EventStore.remove`).

`fault`, when given, is called after each step with its name: the tests stop the
archiver there (raise, or SIGKILL its process) and run it again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from agentledger.events.retention import Finished, RetentionPolicy, due_runs
from agentledger.events.types import RunCreated
from agentledger.schemas.errors import SchemaError
from agentledger.services.adapters.archive.archive import Archive
from agentledger.services.adapters.archive.segment import Segment, SegmentError
from agentledger.services.adapters.store.entries import decode_raw
from agentledger.services.adapters.store.port import EventStore, Exported, Removed
from agentledger.services.adapters.store.request_keys import RequestKeys
from agentledger.services.handlers.state_cache import StateCache

log = logging.getLogger(__name__)
STEPS = ("exported", "written", "verified", "tombstoned", "request_forgotten", "removed")
PAGE = 500  # runs of the index looked at per read
Fault = Callable[[str, str], None]  # (step, run id)


class Outcome(StrEnum):
    ARCHIVED = "archived"  # written (or found written), verified, removed from Redis
    ALREADY = "already"  # not in Redis, in the archive: done before
    CHANGED = "changed"  # the log moved or the run is live again: left whole in Redis
    MISSING = "missing"  # neither in Redis nor in the archive


class Unverified(Exception):
    """The archive did not read back as the log it was written from: nothing is removed."""


def archive_run(
    store: EventStore,
    archive: Archive,
    requests: RequestKeys,
    run_id: str,
    *,
    now: float,
    fault: Fault | None = None,
) -> Outcome:
    step = fault or (lambda _step, _run: None)
    exported = store.export(run_id)
    if exported is None:
        return Outcome.ALREADY if archive.read(run_id) is not None else Outcome.MISSING
    step("exported", run_id)
    seg = _segment(exported, requests, now=now)
    if not _holds(archive, seg):
        archive.write(seg)
    step("written", run_id)
    _verify(archive, seg)
    step("verified", run_id)
    created = _created(exported)
    if seg.request_key is not None and seg.request_value is not None and created is not None:
        archive.put_request(seg.request_key, seg.request_value)
        if archive.request(seg.request_key) != seg.request_value:
            raise Unverified(f"the tombstone of {run_id!r}'s request id did not read back")
        step("tombstoned", run_id)
        assert created.publisher is not None and created.request_id is not None
        requests.forget(created.publisher, created.request_id, seg.request_value)
        step("request_forgotten", run_id)
    removed = store.remove(run_id, count=len(exported.entries), last_id=seg.last_id)
    step("removed", run_id)
    return Outcome.CHANGED if removed is Removed.CHANGED else Outcome.ARCHIVED


def _created(exported: Exported) -> RunCreated | None:
    """The run's RunCreated when it names a publisher's request id."""
    first = decode_raw(b"0-1", exported.entries[0]).data
    if isinstance(first, RunCreated) and first.publisher and first.request_id:
        return first
    return None


def _segment(exported: Exported, requests: RequestKeys, *, now: float) -> Segment:
    last = decode_raw(f"0-{len(exported.entries)}".encode(), exported.entries[-1])
    key = value = None
    if (created := _created(exported)) is not None:
        assert created.publisher is not None and created.request_id is not None
        held = requests.value(created.publisher, created.request_id)
        if held is not None and held.split(" ")[0] == exported.run_id:  # it names this run
            key, value = requests.name(created.publisher, created.request_id), held
    return Segment(exported.run_id, exported.entries, last.id, exported.overflow, key, value, now)


def _holds(archive: Archive, seg: Segment) -> bool:
    """Whether the archive holds this log already, undamaged (a pass run again)."""
    try:
        kept = archive.read(seg.run_id)
    except SegmentError:
        return False  # damaged (a disk's fault): written again
    return kept is not None and (kept.entries, dict(kept.overflow), kept.last_id) == (
        seg.entries, dict(seg.overflow), seg.last_id,
    )  # fmt: skip


def _verify(archive: Archive, seg: Segment) -> None:
    try:
        found = archive.events(seg.run_id)
    except (SegmentError, SchemaError) as exc:
        raise Unverified(f"the archive of {seg.run_id!r} does not read back: {exc}") from None
    if found is None:
        raise Unverified(f"the archive of {seg.run_id!r} is not there after writing it")
    kept, envs = found
    if (len(envs), envs[-1].id, kept.entries, dict(kept.overflow)) != (
        len(seg.entries), seg.last_id, seg.entries, dict(seg.overflow),
    ):  # fmt: skip
        raise Unverified(f"the archive of {seg.run_id!r} differs from its log in Redis")


@dataclass
class PassReport:
    due: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # changed meanwhile: whole in Redis
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run, why): whole in Redis


def retention_pass(
    store: EventStore,
    archive: Archive,
    requests: RequestKeys,
    policy: RetentionPolicy,
    *,
    now: float,
    shards: Sequence[int] | None = None,
    dry_run: bool = False,
    fault: Fault | None = None,
    most: int | None = None,
) -> PassReport:
    """Archive every finished run of `shards` past its age (at most `most` of them: the
    oldest); then trim the feeds to the youngest age. `dry_run`: say which runs are
    due, change nothing."""
    report = PassReport()
    for run_id in due_now(store, policy, now=now, shards=shards)[:most]:
        report.due.append(run_id)
        if dry_run:
            continue
        try:
            outcome = archive_run(store, archive, requests, run_id, now=now, fault=fault)
        except (Unverified, SegmentError, SchemaError, OSError, ValueError) as exc:
            log.error("run %r not archived (it stays in Redis): %s", run_id, exc)
            report.failed.append((run_id, str(exc)))
            continue
        (report.left if outcome is Outcome.CHANGED else report.archived).append(run_id)
    if not dry_run:
        store.trim_feeds(policy.scan_before(now))
    return report


def due_now(
    store: EventStore, policy: RetentionPolicy, *, now: float, shards: Sequence[int] | None = None
) -> list[str]:
    """The runs of `shards` due now, oldest first, read a page of the index at a time."""
    cache = StateCache(store, capacity=PAGE, let_go=lambda _run: None)
    before, since = policy.scan_before(now), None
    seen: set[str] = set()
    due: list[str] = []
    while True:
        page = [
            e
            for e in store.created_before(before, since=since, shards=shards, limit=PAGE)
            if e.run_id not in seen
        ]
        if not page:
            return due
        ids = [e.run_id for e in page]
        seen.update(ids)
        states = cache.load_many(ids)
        finished = [
            Finished(s.run_id, s.over, s.updated_at, s.spec.principal.tenant)
            for s in states
            if s is not None
        ]
        due += due_runs(policy, finished, now=now)
        since = page[-1].created_at
