"""The intake: reads the inbox partitions this process owns, where any system
publishes task events (JSON in the entry's `message` field, signed by its
publisher: `publisher` and `signature`), each publisher in streams of its own
(`Keys.inbox(partition, publisher)`): the stream of every publisher in the
publishers file (or, for the embedded run's intake, of its one publisher). An
entry whose signature is not its publisher's is refused unread, and so is one
whose `publisher` is not its stream's. A valid RunRequested within its publisher's
grant becomes the run's first event, bound to its task queue and tool set, the
run holding only the scopes the grant allows; a control, from a publisher
granted the run's principal, is appended to its run if it fits the run's
state; anything else goes to the rejected stream with its reason and the
original fields.

Every entry ends acked after one try, and is deleted from the inbox: created,
an idempotent no-op (the same request again), or rejected (the rejected stream
keeps a bounded digest: `agentledger.services.loops.rejections`). A bad entry never stops
the intake and is never retried forever: one that a dead intake held is taken
over, and rejected once it has been delivered too often. A deployment intake
whose publishers file is not the deployment's reads nothing (`agreement`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

import redis

from agentledger.events import controls
from agentledger.events.admission import chunk_spans, turns, window_order
from agentledger.events.errors import ControlRefused
from agentledger.events.grants import control_refusal
from agentledger.events.state import RunState
from agentledger.events.types import Event
from agentledger.schemas import inbox
from agentledger.schemas.inbox import Control, RunRequested
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import GROUP
from agentledger.services.adapters.publishers.nonces import Nonces, RedisNonces
from agentledger.services.adapters.publishers.publishers_file import Registry
from agentledger.services.adapters.redis.client import is_cluster
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.redis.slot_reads import SlotReads
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.keys import Keys
from agentledger.services.loops import rejections
from agentledger.services.loops.agreement import Agreement
from agentledger.services.loops.inbox_auth import Granted, authenticate, fresh_refusals
from agentledger.services.loops.inbox_parse import Rejected, Specs, parse
from agentledger.services.loops.inbox_streams import InboxStreams
from agentledger.services.loops.intake_entries import Entry, attempt, reason_of, whose
from agentledger.services.loops.intake_requests import SOURCE, Checks, Prepared, Requests
from agentledger.services.loops.intake_workspaces import Workspaces

READ_COUNT = 20  # entries per stream per read (a batch): what one read holds is bounded by it
# a backlog is read on, without blocking, to this many entries or bytes (one read at least),
# and handled a chunk at a time, round-robin by publisher and tenant
# (`agentledger.events.admission.window_order`): a tenant's request behind another's
# backlog in a stream is admitted in the first chunk, not after the backlog
WINDOW_ENTRIES = 1_000
WINDOW_BYTES = 32 << 20
CHUNK = 32
MAX_DELIVERIES = 3  # an entry that took down this many intakes is rejected as poison
BEATS_PER_TTL = 4  # the intake beats (and looks at what it owns) this often per member ttl
RECLAIM_IDLE_MS = 10_000
RECLAIM_EVERY = 20  # polls of at most 0.5 s: look for a dead intake's entries every ~10 s
log = logging.getLogger(__name__)


class Intake:
    def __init__(
        self,
        app: App,
        client: redis.Redis,
        keys: Keys,
        directory: Directory,
        membership: Membership,
        publishers: Registry | None = None,
        on_rejected: Callable[[], None] | None = None,  # told of each rejection (metrics)
        *,
        only: str | None = None,  # read this publisher's streams alone (the embedded run's)
        agreement: Agreement | None = None,  # read only while the file is the deployment's
    ):
        self._app = app
        self._publishers = self.registry = publishers or Registry(app.settings.publishers_path)
        self.requests = Requests(app, client, keys, directory, Workspaces(app.settings))
        self._specs = Specs()  # each distinct spec validated once
        self._on_rejected = on_rejected
        self._r = client
        self._keys = keys
        self._directory = directory
        self._membership = membership
        self._only = only
        self.agreement = agreement
        self._owned: list[int] = []
        self._next_beat = 0.0  # time.monotonic()
        self._names: tuple[str, ...] = (only,) if only else ()  # whose streams are read
        slot_reads = SlotReads(client, GROUP, app.worker) if is_cluster(client) else None
        self._streams = InboxStreams(client, keys, GROUP, app.worker, slot_reads)
        self._nonces: Nonces = RedisNonces(client, keys)  # replays (31.4)

    @property
    def held(self) -> str | None:
        """Why this intake reads nothing now (its file is not the deployment's); None: it reads."""
        return self.agreement.held if self.agreement is not None else None

    def poll_once(self, *, block_ms: int = 500) -> int:
        now = time.monotonic()
        if now >= self._next_beat:  # not at every entry: a busy inbox wakes us per entry
            self._membership.beat()
            self._owned = self._membership.owned(range(self._keys.inbox_partitions))
            self._next_beat = now + self._membership.ttl_s / BEATS_PER_TTL
        registry = self._publishers.pinned()  # one file for the whole batch
        if self.agreement is not None and self.agreement.check(registry.digest()) is not None:
            threading.Event().wait(block_ms / 1000)
            return 0
        names = self._readable(registry)
        if not self._owned or not names:
            threading.Event().wait(block_ms / 1000)
            return 0
        window = self._window(names, block_ms)
        handled = 0
        owned = [(e, whose(e, self._app.settings.inbox_max_bytes)) for e in window]
        first = len({who for _, who in owned})  # the first chunk: each sender's first
        while owned:
            order = window_order([who for _, who in owned])
            start, end = chunk_spans(len(order), first=first, size=CHUNK)[0]
            taken = set(order[start:end])
            self.handle_batch([owned[i][0] for i in order[start:end]], registry=registry)
            handled += len(taken)
            owned = [pair for i, pair in enumerate(owned) if i not in taken]
            first = CHUNK
            if owned and len(owned) < WINDOW_ENTRIES:  # what came in meanwhile takes turns too
                owned += [
                    (e, whose(e, self._app.settings.inbox_max_bytes)) for e in self._more(names)
                ]
        return handled

    def _more(self, names: Sequence[str]) -> list[Entry]:
        """One read without blocking: entries that came in while a window was handled
        (a tenant's request arriving behind another's window waits one chunk)."""
        reply = self._streams.read(self._owned, names, count=READ_COUNT, block_ms=0)
        return [
            Entry(part, publisher, entry_id, fields or {})
            for part, publisher, entries in reply
            for entry_id, fields in entries
        ]

    def _window(self, names: Sequence[str], block_ms: int) -> list[Entry]:
        """What the streams hold, up to a window: a read that came back full (a
        stream had more) is followed by reads without blocking, to `WINDOW_ENTRIES`
        entries or `WINDOW_BYTES` bytes, or until a read finds nothing new."""
        batch: list[Entry] = []
        size, block = 0, block_ms
        while True:
            reply = self._streams.read(self._owned, names, count=READ_COUNT, block_ms=block)
            more = [
                Entry(part, publisher, entry_id, fields or {})
                for part, publisher, entries in reply
                for entry_id, fields in entries
            ]
            batch += more
            size += sum(len(k) + len(v) for e in more for k, v in e.fields.items())
            full = any(len(entries) >= READ_COUNT for _, _, entries in reply)
            if not full or len(batch) >= WINDOW_ENTRIES or size >= WINDOW_BYTES:
                return batch
            block = 0

    def _readable(self, registry: Registry) -> tuple[str, ...]:
        """Whose streams are read: the publishers of the file (the last good one's
        while it is broken: their entries are refused with the reason), or the one."""
        if self._only is None:
            file, _ = registry.snapshot()
            if not isinstance(file, ConfigError):
                self._names = tuple(sorted(file.publishers))
        return self._names

    def handle(
        self,
        part: int,
        publisher: str,
        entry_id: bytes,
        fields: dict[bytes, bytes],
        *,
        registry: Registry | None = None,
    ) -> str | None:
        """Turn one entry of `publisher`'s stream into its outcome and ack it; the
        rejection reason, if any."""
        return self.handle_batch([Entry(part, publisher, entry_id, fields)], registry=registry)[0]

    def handle_batch(
        self, batch: Sequence[Entry], *, registry: Registry | None = None
    ) -> list[str | None]:
        """Turn each entry into its outcome, then ack them all together; each one's
        rejection reason, if any. Each entry is read, authenticated and checked for
        replay on its own (the nonces claimed together); the run requests are
        created together, each control alone in its turn (after the runs requested
        before it). A lost Redis raises: nothing is acked, every entry is handled
        again (a request id makes a run request's second time a no-op)."""
        registry = registry or self._publishers
        reasons: list[str | None] = [None] * len(batch)
        read: dict[int, tuple[RunRequested | Control, Granted]] = {}
        for i, entry in enumerate(batch):
            got, reasons[i] = attempt(entry.cause, partial(self._read, entry, registry))
            if got is not None:
                read[i] = got
        self._check_fresh(batch, read, reasons)
        live = [i for i in read if reasons[i] is None]
        for start, end in turns([isinstance(read[i][0], Control) for i in live]):
            span = live[start:end]
            message, by = read[span[0]]
            if isinstance(message, Control):
                cause = batch[span[0]].cause
                act = partial(self.control, message, by, causation_id=cause)
                _, reasons[span[0]] = attempt(cause, act)
            else:
                self._create(batch, [(i, *read[i]) for i in span], reasons)
        self._finish(batch, reasons)
        return reasons

    def _read(self, entry: Entry, registry: Registry) -> tuple[RunRequested | Control, Granted]:
        max_bytes = self._app.settings.inbox_max_bytes
        by = authenticate(entry.fields, registry, max_bytes=max_bytes)
        if by.name != entry.publisher:
            raise Rejected(
                f"wrong stream: signed by {by.name!r} but written to {entry.publisher!r}'s stream"
            )
        return parse(entry.fields, max_bytes=max_bytes, specs=self._specs), by

    def _check_fresh(
        self,
        batch: Sequence[Entry],
        read: dict[int, tuple[RunRequested | Control, Granted]],
        reasons: list[str | None],
    ) -> None:
        """Refuse the replayed ones (their nonces claimed together)."""
        order = list(read)
        checked = [(*read[i], batch[i].cause) for i in order]
        found, failed = attempt(None, lambda: fresh_refusals(
            checked, self._nonces, partitions=self._keys.inbox_partitions,
            now=self._app.clock.now(), window_s=self._app.settings.replay_window_s,
        ))  # fmt: skip
        for j, i in enumerate(order):
            reasons[i] = failed if found is None else found[j]

    def _create(
        self,
        batch: Sequence[Entry],
        asked: Sequence[tuple[int, RunRequested | Control, Granted]],
        reasons: list[str | None],
    ) -> None:
        """The run requests of one turn: each checked on its own, created together."""
        checks = Checks(self._app)
        ready: list[tuple[int, Prepared]] = []
        for i, message, by in asked:
            cause = batch[i].cause
            assert isinstance(message, RunRequested)
            prepare = partial(self.requests.prepare, message, by, cause=cause, checks=checks)
            prepared, reasons[i] = attempt(cause, prepare)
            if prepared is not None:
                ready.append((i, prepared))
        outcomes, failed = attempt(None, lambda: self.requests.create([p for _, p in ready]))
        for j, (i, _) in enumerate(ready):
            reasons[i] = failed if outcomes is None else reason_of(outcomes[j], batch[i].cause)

    def control(self, message: Control, by: Granted, *, causation_id: str | None = None) -> None:
        """Append what a person or system said to a run, if its publisher is granted
        the run's principal and it fits the run's state."""
        state = self._app.runs.load(message.run_id)
        if state is None:
            raise Rejected(f"no run {message.run_id!r}")
        if (refusal := control_refusal(by.name, by.grant, state.spec.principal)) is not None:
            raise Rejected(refusal)
        try:
            self._app.engine.take(
                message.run_id,
                Decided(SOURCE, lambda s: decide_control(s, message, publisher=by.name)),
                causation_id=causation_id,
                held=state,
            )
        except ControlRefused as exc:
            raise Rejected(exc.reason) from None

    def accept(self, message: RunRequested, by: Granted, *, causation_id: str | None = None) -> str:
        """Create the run (bound to its task queue and tool set, holding the scopes
        its spec asks for that the grant allows); returns its id."""
        return self.requests.accept(message, by, causation_id=causation_id)

    def _finish(self, batch: Sequence[Entry], reasons: Sequence[str | None]) -> None:
        """The rejected entries to the rejected stream with their reasons, and every
        entry acked and deleted: one pipeline."""
        acked: dict[str, list[bytes]] = {}
        with self._r.pipeline(transaction=False) as pipe:
            for entry, reason in zip(batch, reasons, strict=True):
                if reason is not None:
                    log.warning("inbox entry %s rejected: %s", entry.cause, reason)
                    moved: Any = rejections.digest(
                        entry.cause, entry.publisher, reason, entry.fields
                    )
                    maxlen = self._app.settings.rejected_maxlen
                    pipe.xadd(
                        self._keys.rejected(entry.part), moved, maxlen=maxlen, approximate=True
                    )
                    if self._on_rejected is not None:
                        self._on_rejected()
                acked.setdefault(self._keys.inbox(entry.part, entry.publisher), []).append(
                    entry.entry_id
                )
            for stream, ids in acked.items():
                pipe.xack(stream, GROUP, *ids)
                pipe.xdel(stream, *ids)
            pipe.execute()

    def reclaim_once(self, *, min_idle_ms: int = RECLAIM_IDLE_MS) -> int:
        """Entries an intake took and never acknowledged (it died): handle them here,
        or reject them as poison once they have been delivered too often."""
        if self.held is not None:
            return 0
        registry = self._publishers.pinned()
        n = 0
        todo: list[Entry] = []
        done: list[tuple[Entry, str | None]] = []
        for part, publisher, claimed in self._streams.claim(
            self._owned, self._readable(registry), min_idle_ms=min_idle_ms
        ):
            stream = self._keys.inbox(part, publisher)
            for entry_id, fields in claimed:
                n += 1
                entry = Entry(part, publisher, entry_id, fields or {})
                pending = cast(
                    list[dict[str, Any]],
                    self._r.xpending_range(stream, GROUP, entry_id, entry_id, 1),
                )
                times = int(pending[0]["times_delivered"]) if pending else 1
                if not fields:
                    done.append((entry, None))  # trimmed away: nothing left
                elif times > MAX_DELIVERIES:
                    done.append((entry, f"poison: delivered {times} times without an answer"))
                else:
                    todo.append(entry)
        if done:
            self._finish([e for e, _ in done], [r for _, r in done])
        if todo:
            self.handle_batch(todo, registry=registry)
        return n

    def run(self, stop: threading.Event) -> None:
        polls = 0
        try:
            while not stop.is_set():
                self.poll_once()
                polls += 1
                if polls % RECLAIM_EVERY == 0:
                    self.reclaim_once()
        finally:
            self._streams.close()


def decide_control(s: RunState, m: Control, *, publisher: str) -> list[Event]:
    """What a control appends to a run in state `s` (ControlRefused: it does not fit);
    the CLI asks it too, before publishing, so a control bound to be refused is never sent."""
    p = publisher
    match m:
        case inbox.RunCancelRequested():
            return controls.cancel(s, by=m.by, source="inbox", reason=m.reason, publisher=p)
        case inbox.ApprovalGranted():
            return controls.approve(s, m.call_id, by=m.by, note=m.note, publisher=p)
        case inbox.ApprovalDenied():
            return controls.deny(s, m.call_id, by=m.by, note=m.note, publisher=p)
        case inbox.HumanReplied():
            return controls.reply(s, by=m.by, text=m.text, escalation=m.escalation, publisher=p)
        case inbox.RunResumed():
            return controls.resume(s, by=m.by, note=m.note, escalation=m.escalation, publisher=p)
        case inbox.RunAborted():
            return controls.abort(s, by=m.by, note=m.note, escalation=m.escalation, publisher=p)
