"""The event store port: append at an expected seq, read after a seq, and read
the tail after a state the caller already folded, checked against the log.

Appends are idempotent on the first event's id: a resent append whose reply
was lost returns the same result instead of writing twice.

Snapshots are opaque bytes to the store (`agentledger.services.handlers.state_cache` makes them
with `agentledger.events.snapshot`): a header, the run's spec (stored once) and pages of past
turns (each written once, read only on demand). The store keeps the newest
header per run and hands it out when the entry at its seq still holds the event
it was folded up to.

No event is stored larger than the store's cap (`event_max_bytes`): `as_stored`
cuts a tool-made field that would pass it (`agentledger.events.output_cap.cut_event`), and
`append` writes the rest of that field's text as the run's overflow pages in the
same call as the event (both or neither); `overflow_pages` reads them back.

Retention (`agentledger.services.handlers.archiver`) takes a finished run out whole:
`export` hands out its log as stored and its overflow pages, `remove` deletes the run
(log, snapshot, overflow pages, its entries in the indexes) in one atomic step, and
only while the log is still the one exported; `created_before` lists the runs a pass
looks at and `trim_feeds` drops the feeds' entries older than the retention age."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from agentledger.schemas.envelope import Envelope


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A command for a worker pool, as the message its task-queue stream carries."""

    stream: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Append:
    """One append of `append_many`: `append`'s arguments."""

    run_id: str
    events: Sequence[Envelope[Any]]
    expected_seq: int
    live: bool
    messages: Sequence[Outgoing] = ()
    expected_id: str = ""
    snapshot: Snapshot | None = None


@dataclass(frozen=True, slots=True)
class RunIndexEntry:
    run_id: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Exported:
    """A run's log as stored, for the archive: the packed envelope of each event
    (seq 1, 2, … in order) and its overflow pages ('<event id>:<n>' -> page)."""

    run_id: str
    entries: list[bytes]
    overflow: dict[str, bytes]


class Removed(StrEnum):
    """What `remove` did: removed the run, found it gone already, or left it (its log
    is no longer the one exported, or it is live)."""

    REMOVED = "removed"
    GONE = "gone"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int
    event_id: str  # the id of the event at `seq`: a snapshot is used only while the log agrees
    version: str  # the snapshot format; a snapshot of another version is ignored
    state: bytes  # the header
    spec: bytes | None = None  # written with a run's first snapshot (kept once); read back
    pages: Mapping[int, bytes] = field(default_factory=dict)  # full pages to write, once each


@dataclass(frozen=True, slots=True)
class Head:
    """Where a caller's folded state of a run ends: seq 0 (nothing folded) or
    the seq and id of the last event it folded."""

    run_id: str
    seq: int = 0
    event_id: str = ""


@dataclass(frozen=True, slots=True)
class Tail:
    """What to fold to bring a head up to date. `base` is the seq `events`
    follow: the head's own seq when the log still holds the head's event, the
    snapshot's seq when a newer snapshot (of the version asked for) still
    matches the log, else 0 — fold `events`, the whole log, from nothing."""

    base: int
    events: list[Envelope[Any]]
    snapshot: Snapshot | None  # set when `events` follow it
    snapshot_seq: int  # the newest stored snapshot of that version (0: none)


class EventStore(Protocol):
    def append(
        self,
        run_id: str,
        events: Sequence[Envelope[Any]],
        *,
        expected_seq: int,
        live: bool,
        messages: Sequence[Outgoing] = (),
        expected_id: str = "",
        snapshot: Snapshot | None = None,
    ) -> int:
        """Append after `expected_seq`; return the new seq or raise ConcurrencyConflict.

        `live` says whether the run is live after these events (the sweeper's index).
        `messages` are queued with the events, atomically: both or neither.
        `expected_id`, when given, is the id of the event at `expected_seq`: a log of
        that length that ends with another event is a conflict too.
        `snapshot`, of the state these events lead to, is kept with them as
        `save_snapshot` keeps one, in the same call: only if the append lands."""
        ...

    def append_many(self, appends: Sequence[Append]) -> list[int | Exception]:
        """Each append as `append` makes it, sent together (on Redis pipelined: one round
        trip), each one's outcome in its place: its new seq, or what it raised
        (ConcurrencyConflict, an error of its own). A lost connection raises for all:
        what was sent may have landed, and a resend of each is recognised as one."""
        ...

    def as_stored(self, run_id: str, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        """The events as `append` will write them (a store may rewrite them: redact
        secrets, cut a field past the cap). A writer folds these, so the state it goes
        on with is the log's."""
        ...

    def read(self, run_id: str, *, after_seq: int = 0) -> list[Envelope[Any]]: ...

    def overflow_pages(self, run_id: str, ref: str, first: int, count: int) -> list[str]:
        """Pages `first`… (`count` of them) of the overflow an event's `Overflow` names
        (`ref`); InvalidEvent when one is missing."""
        ...

    def read_tails(self, heads: Sequence[Head], *, snapshot_version: str) -> list[Tail]:
        """One tail per head, in order, read at once (one round trip on Redis)."""
        ...

    def save_snapshot(self, run_id: str, snapshot: Snapshot) -> None:
        """Keep `snapshot` unless one of the same version at a seq as high is kept; its
        spec and pages are kept in any case when none are there yet."""
        ...

    def snapshot_pages(self, run_id: str, count: int) -> list[bytes]:
        """The first `count` pages of past turns of the run's snapshot."""
        ...

    def runs(self, *, limit: int = 50) -> list[RunIndexEntry]:
        """The newest runs first."""
        ...

    def idle_live_runs(
        self, *, idle_since: float, shards: Sequence[int] | None = None, limit: int = 100
    ) -> list[str]:
        """Live runs (of these shards; None: all) whose last progress (or look) is older
        than `idle_since`, the oldest first."""
        ...

    def touch(self, run_id: str, *, at: float, seq: int | None = None) -> None:
        """Mark a live run as looked at `at` (which may be in the future: a parked run's
        deadline less a lease), so the sweeper waits until a lease after it. With `seq`,
        only while the run's log is still at that seq: an append since then scored the
        run afresh and wins."""
        ...

    def export(self, run_id: str) -> Exported | None:
        """The run's log as stored and its overflow pages (None: no such log)."""
        ...

    def remove(self, run_id: str, *, count: int, last_id: str) -> Removed:
        """Delete the run — log, snapshot, overflow pages, its entries in the runs and
        live indexes — in one atomic step, only while its log holds `count` events
        ending with `last_id` and it is not live."""
        ...

    def created_before(
        self,
        before: float,
        *,
        shards: Sequence[int] | None = None,
        offset: int = 0,
        limit: int = 1000,
    ) -> list[RunIndexEntry]:
        """Up to `limit` runs (of these shards; None: all) created before `before`, oldest
        first (by creation time, then id), from the `offset`-th on."""
        ...

    def trim_feeds(self, before: float) -> None:
        """Drop the feeds' entries appended before `before`."""
        ...
