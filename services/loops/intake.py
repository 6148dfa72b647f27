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

import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import redis

from agentledger.events import controls
from agentledger.events.errors import ControlRefused, CoreError
from agentledger.events.grants import (
    REPLAYED,
    control_refusal,
    replay_model_refusal,
    request_refusal,
    shard_refusal,
)
from agentledger.events.state import RunState
from agentledger.events.types import DEFAULT_QUEUE, Event, RunCreated
from agentledger.schemas import inbox
from agentledger.schemas.errors import InvalidSpec, SchemaError
from agentledger.schemas.inbox import Control, RunRequested
from agentledger.schemas.spec import ReplayModel
from agentledger.services.adapters.archive.archive import open_archive
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.inbox.publishing import GROUP, entry_name
from agentledger.services.adapters.publishers.nonces import Nonces, RedisNonces
from agentledger.services.adapters.publishers.publishers_file import Registry
from agentledger.services.adapters.reading.archived import archived_tenant
from agentledger.services.adapters.redis.client import is_cluster
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.redis.replicas import NotReplicated
from agentledger.services.adapters.redis.slot_reads import SlotReads
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.clock import new_run_id
from agentledger.services.errors import ConcurrencyConflict, ConfigError, ServiceError
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.handlers.spec_check import check_spec
from agentledger.services.keys import Keys
from agentledger.services.loops import rejections
from agentledger.services.loops.agreement import Agreement
from agentledger.services.loops.inbox_auth import Granted, authenticate, check_fresh
from agentledger.services.loops.inbox_parse import Rejected, parse
from agentledger.services.loops.inbox_streams import InboxStreams
from agentledger.services.loops.intake_spec import held, priced
from agentledger.services.loops.intake_workspaces import Workspaces

SOURCE = "intake"
READ_COUNT = 20  # entries per read: what one read can hold in memory is bounded by it
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
        self._workspaces = Workspaces(app.settings)
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
        self._shards_read = keys.shards  # the deployment's shard count, as last read (31.5)
        at = app.settings  # retention (36.1): the tombstones of archived runs' request ids
        self._archive = open_archive(at.archive_url, at.state_dir, at.prefix)
        self._requests = RedisRequestKeys(client, keys)

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
        reply = self._streams.read(self._owned, names, count=READ_COUNT, block_ms=block_ms)
        handled = 0
        for part, publisher, entries in reply:
            for entry_id, fields in entries:
                self.handle(part, publisher, entry_id, fields or {}, registry=registry)
                handled += 1
        return handled

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
        cause = entry_name(part, publisher, entry_id.decode())
        reason: str | None = None
        try:
            max_bytes = self._app.settings.inbox_max_bytes
            by = authenticate(fields, registry or self._publishers, max_bytes=max_bytes)
            if by.name != publisher:
                raise Rejected(
                    f"wrong stream: signed by {by.name!r} but written to {publisher!r}'s stream"
                )
            message = parse(fields, max_bytes=max_bytes)
            check_fresh(
                message, by, self._nonces, partitions=self._keys.inbox_partitions, entry=cause,
                now=self._app.clock.now(), window_s=self._app.settings.replay_window_s,
            )  # fmt: skip
            if isinstance(message, RunRequested):
                self.accept(message, by, causation_id=cause)
            else:
                self.control(message, by, causation_id=cause)
        except Rejected as r:
            reason = r.reason
        except (redis.ConnectionError, redis.TimeoutError, NotReplicated):
            raise  # not the entry's fault: it stays pending and is handled again
        except (CoreError, SchemaError, ServiceError) as exc:  # e.g. the run's log is broken
            reason = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a bug must not wedge the intake: say so, move on
            log.exception("inbox entry %s could not be handled", cause)
            reason = f"internal error: {type(exc).__name__}: {exc}"
        self._finish(part, publisher, entry_id, fields, reason)
        return reason

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
        spec = message.spec
        queue = message.queue or spec.queue or DEFAULT_QUEUE
        if (refusal := request_refusal(by.name, by.grant, spec.principal, queue)) is not None:
            raise Rejected(refusal)
        self._check_reach(message, by)
        spec = priced(held(spec, by.grant), self._app.settings)
        placement = self._workspaces.decide(message, by)  # the server decides where it works
        toolset = message.toolset or self._toolset_for(queue, list(spec.tools))
        try:
            # the workspace rule checked the workspace: no existence probe of a path it refused
            checked = (
                spec if spec.workspace is None else spec.model_copy(update={"workspace": None})
            )
            check_spec(
                checked, message.base_dir, manifest=self._directory.manifest(queue, toolset),
                settings=self._app.settings,  # bounds: the operator's maxima
            )  # fmt: skip
        except InvalidSpec as exc:
            raise Rejected(f"invalid spec: {exc}") from None
        run_id = message.run_id or new_run_id(random.randrange(self._keys.shards))
        if message.request_id is not None:
            run_id, archived = self._claim_request(message, by.name, run_id)
            if archived:  # created long ago, archived since: answered, not made again
                return run_id
        if message.run_id and self._archive is not None and self._archive.holds(run_id):
            raise Rejected(f"run {run_id!r} exists already (archived)")  # never made again
        placed = self._workspaces.place(placement, run_id)
        created = RunCreated(
            spec=spec, publisher=by.name, request_id=message.request_id, workspace=placed.path,
            base_dir=message.base_dir, queue=queue, toolset=toolset,
        )  # fmt: skip
        try:
            self._app.runs.create(created, run_id, source=SOURCE, causation_id=causation_id)
        except ConcurrencyConflict:
            existing = self._app.runs.load(run_id)
            if (
                message.request_id is None or existing is None
                or (existing.request_id, existing.publisher) != (message.request_id, by.name)
            ):  # fmt: skip
                self._workspaces.discard(placed, run_id)
                raise Rejected(f"run {run_id!r} exists already") from None
        return run_id

    def _check_reach(self, message: RunRequested, by: Granted) -> None:
        """What the run would reach beyond its own log: a replay model only a run of
        the same tenant; a chosen run id only a shard the deployment reads."""
        model = message.spec.model
        if isinstance(model, ReplayModel):
            recorded = self._app.runs.load(model.replay.run_id)
            tenant = recorded.spec.principal.tenant if recorded is not None else None
            tenant = tenant or archived_tenant(self._archive, model.replay.run_id)
            refusal = replay_model_refusal(
                by.name, message.spec.principal.tenant, model.replay.run_id, tenant
            )
            if refusal is not None:
                raise Rejected(refusal)
        if message.run_id is not None and (named := Keys.named_shard(message.run_id)) is not None:
            if named >= self._shards_read:  # the count may have grown since it was read
                recorded_count = cast(bytes | None, self._r.hget(self._keys.meta, "shards"))
                self._shards_read = max(self._keys.shards, int(recorded_count or 0))
            if (refusal := shard_refusal(message.run_id, named, self._shards_read)) is not None:
                raise Rejected(refusal)

    def _toolset_for(self, queue: str, modules: list[str]) -> str:
        found = self._directory.for_modules(queue, modules)
        if len(found) == 1:
            return found[0]
        what = f"queue {queue!r} with modules {sorted(modules)}"
        if not found:
            raise Rejected(f"unknown tool set: no worker has served {what}; name one in 'toolset'")
        raise Rejected(f"ambiguous tool set: {what} is served by {found}; name one in 'toolset'")

    def _claim_request(self, msg: RunRequested, publisher: str, run_id: str) -> tuple[str, bool]:
        """The run a publisher's request id names: this one if it is new, the one it named
        before if the publisher sends the same request again (stamped anew: the stamp is
        not the request); a different request under it is refused as replayed. Another
        publisher's same request id is another request. True second: the run was archived
        (its key left Redis with it, its tombstone in the archive answers): not made again."""
        assert msg.request_id is not None
        asked = msg.model_dump_json(exclude={"run_id", "issued_at", "nonce"})
        digest = hashlib.sha256(f"{publisher}\n{asked}".encode()).hexdigest()
        key = self._keys.request(publisher, msg.request_id)
        value, archived = f"{run_id} {digest}", False
        if self._r.set(key, value, nx=True):
            # after the claim: an archiver files the tombstone before it deletes the key
            tombstone = self._archive.request(key) if self._archive is not None else None
            if tombstone is None:
                return run_id, False
            self._requests.forget(publisher, msg.request_id, value)
            kept, archived = tombstone.split(" "), True
        else:
            kept = (cast(bytes | None, self._r.get(key)) or b"").decode().split(" ")
        if len(kept) == 2 and kept[1] == digest:
            return kept[0], archived  # the same request again: the same run
        why = f"names run {kept[0]!r} already, for another request"
        raise Rejected(f"{REPLAYED}: request_id {msg.request_id!r} {why}")

    def _finish(
        self,
        part: int,
        publisher: str,
        entry_id: bytes,
        fields: dict[bytes, bytes],
        reason: str | None,
    ) -> None:
        stream = self._keys.inbox(part, publisher)
        with self._r.pipeline(transaction=False) as pipe:
            if reason is not None:
                name = entry_name(part, publisher, entry_id.decode())
                log.warning("inbox entry %s rejected: %s", name, reason)
                moved: Any = rejections.digest(name, publisher, reason, fields)
                maxlen = self._app.settings.rejected_maxlen
                pipe.xadd(self._keys.rejected(part), moved, maxlen=maxlen, approximate=True)
                if self._on_rejected is not None:
                    self._on_rejected()
            pipe.xack(stream, GROUP, entry_id)
            pipe.xdel(stream, entry_id)
            pipe.execute()

    def reclaim_once(self, *, min_idle_ms: int = RECLAIM_IDLE_MS) -> int:
        """Entries an intake took and never acknowledged (it died): handle them here,
        or reject them as poison once they have been delivered too often."""
        if self.held is not None:
            return 0
        registry = self._publishers.pinned()
        n = 0
        for part, publisher, claimed in self._streams.claim(
            self._owned, self._readable(registry), min_idle_ms=min_idle_ms
        ):
            stream = self._keys.inbox(part, publisher)
            for entry_id, fields in claimed:
                n += 1
                pending = cast(
                    list[dict[str, Any]],
                    self._r.xpending_range(stream, GROUP, entry_id, entry_id, 1),
                )
                times = int(pending[0]["times_delivered"]) if pending else 1
                if not fields:
                    self._finish(part, publisher, entry_id, {}, None)  # trimmed away: nothing left
                elif times > MAX_DELIVERIES:
                    why = f"poison: delivered {times} times without an answer"
                    self._finish(part, publisher, entry_id, fields, why)
                else:
                    self.handle(part, publisher, entry_id, fields, registry=registry)
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
