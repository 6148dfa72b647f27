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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum

from agentledger.events.errors import CoreError
from agentledger.events.retention import Finished, RetentionPolicy, due_runs
from agentledger.events.state import RunState
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
ARCHIVERS = 8  # runs archived at once: each waits mostly on the disk (fsync) and Redis
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
        store.remove(run_id, count=0, last_id="")  # an index entry without its log: dropped
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
        found = archive.events(seg.run_id, fresh=True)  # read back from where it was written
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
    """Archive every finished run of `shards` past its age, oldest first (at most
    `most` of them); then trim the feeds to the youngest age. `dry_run`: say which
    runs are due, change nothing."""
    report = PassReport()

    def one(run_id: str) -> Outcome | str:
        try:
            return archive_run(store, archive, requests, run_id, now=now, fault=fault)
        except (Unverified, SegmentError, SchemaError, OSError, ValueError) as exc:
            log.error("run %r not archived (it stays in Redis): %s", run_id, exc)
            return str(exc)

    with ThreadPoolExecutor(ARCHIVERS, thread_name_prefix="archiver") as pool:

        def act(due: list[str]) -> int:
            report.due += due
            if dry_run:
                return 0
            gone = 0  # of the runs index
            for run_id, outcome in zip(due, pool.map(one, due), strict=True):
                if not isinstance(outcome, Outcome):  # (an Outcome is a str too)
                    report.failed.append((run_id, outcome))
                elif outcome is Outcome.CHANGED:
                    report.left.append(run_id)
                else:
                    report.archived.append(run_id)
                    gone += 1
            return gone

        _walk(store, policy, act, now=now, shards=shards, most=most)
    if not dry_run:
        store.trim_feeds(policy.scan_before(now))
    return report


def due_now(
    store: EventStore, policy: RetentionPolicy, *, now: float, shards: Sequence[int] | None = None
) -> list[str]:
    """The runs of `shards` due now, oldest first (what a dry run names)."""
    due: list[str] = []

    def name(page_due: list[str]) -> int:
        due.extend(page_due)
        return 0  # they stay

    _walk(store, policy, name, now=now, shards=shards)
    return due


def _walk(
    store: EventStore,
    policy: RetentionPolicy,
    act: Callable[[list[str]], int],
    *,
    now: float,
    shards: Sequence[int] | None,
    most: int | None = None,
) -> None:
    """`act` on the due runs of each page of the index, oldest first; `act` says how
    many of them left the index (the next page starts that much earlier)."""
    offset = 0  # runs of the index before this one stay in Redis (not due, or left)
    done = 0
    cache = StateCache(store, capacity=PAGE, let_go=lambda _run: None)
    before = policy.scan_before(now)
    while most is None or done < most:
        page = store.created_before(before, shards=shards, offset=offset, limit=PAGE)
        if not page:
            return
        due = _due(cache, policy, [e.run_id for e in page], now=now)
        due = due if most is None else due[: most - done]
        done += len(due)
        offset += len(page) - act(due)


def _due(
    cache: StateCache, policy: RetentionPolicy, run_ids: list[str], *, now: float
) -> list[str]:
    """Those of the runs due now, in order (a run that does not fold is not)."""
    try:
        states = cache.load_many(run_ids)
    except (CoreError, SchemaError):
        states = [_load_alone(cache, run_id) for run_id in run_ids]
    finished = [
        Finished(s.run_id, s.over, s.updated_at, s.spec.principal.tenant)
        for s in states
        if s is not None
    ]
    return due_runs(policy, finished, now=now)


def _load_alone(cache: StateCache, run_id: str) -> RunState | None:
    try:
        return cache.load(run_id)
    except (CoreError, SchemaError) as exc:
        log.error("run %r cannot be folded, not archived: %s", run_id, exc)
        return None
