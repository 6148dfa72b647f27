"""The intake: reads the inbox partitions this process owns, where any system
publishes task events (JSON in the entry's `message` field, signed by its
publisher: `publisher` and `signature`). An entry whose signature is not its
publisher's is refused unread. A valid RunRequested within its publisher's
grant becomes the run's first event, bound to its task queue and tool set, the
run holding only the scopes the grant allows; a control, from a publisher
granted the run's principal, is appended to its run if it fits the run's
state; anything else goes to the rejected stream with its reason and the
original fields.

Every entry ends acked after one try, and is deleted from the inbox: created,
an idempotent no-op (the same request again), or rejected. A bad entry never
stops the intake and is never retried forever: one that a dead intake held is
taken over, and rejected once it has been delivered too often."""

from __future__ import annotations

import hashlib
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import redis

from events import controls
from events.errors import ControlRefused, CoreError
from events.grants import (
    REPLAYED,
    control_refusal,
    held_scopes,
    replay_model_refusal,
    request_refusal,
    shard_refusal,
)
from events.state import RunState
from events.types import DEFAULT_QUEUE, Event, RunCreated
from schemas import inbox
from schemas.errors import InvalidSpec, SchemaError
from schemas.inbox import Control, RunRequested
from schemas.signature import entry as signed_entry
from schemas.spec import ReplayModel
from services.adapters.broker.membership import Membership
from services.adapters.publishers.nonces import Nonces, RedisNonces
from services.adapters.publishers.publishers_file import Registry, Signer
from services.adapters.redis.client import is_cluster
from services.adapters.redis.directory import Directory
from services.adapters.redis.replicas import NotReplicated
from services.adapters.redis.slot_reads import SlotReads
from services.clock import new_run_id
from services.errors import ConcurrencyConflict, ServiceError
from services.handlers.app import App
from services.handlers.spec_check import check_spec
from services.keys import Keys
from services.loops.inbox_auth import Granted, authenticate, check_fresh
from services.loops.inbox_parse import Rejected, parse
from services.loops.intake_workspaces import Workspaces

GROUP = "intake"
SOURCE = "intake"
READ_COUNT = 20  # entries per read: what one read can hold in memory is bounded by it
MAX_DELIVERIES = 3  # an entry that took down this many intakes is rejected as poison
BEATS_PER_TTL = 4  # the intake beats (and looks at what it owns) this often per member ttl
RECLAIM_IDLE_MS = 10_000
RECLAIM_EVERY = 20  # polls of at most 0.5 s: look for a dead intake's entries every ~10 s
KEEP_FIELD_BYTES = 1 << 20  # of each original field kept with a rejection
log = logging.getLogger(__name__)


def partition_of(key: str, partitions: int) -> int:
    """The inbox partition of a request id (or of the run id, with none)."""
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % partitions


def publish(
    client: redis.Redis, keys: Keys, message: RunRequested | Control, *, signer: Signer
) -> str:
    """What any publisher does: one XADD of the message as JSON, signed with its
    key, to a partition chosen by its request id (or at random)."""
    key = getattr(message, "request_id", None) or getattr(message, "run_id", None)
    n = keys.inbox_partitions
    part = partition_of(key, n) if key else random.randrange(n)
    fields = signed_entry(signer.name, signer.key, stamped(message).model_dump_json().encode())
    entry = cast(bytes, client.xadd(keys.inbox(part), fields))  # type: ignore[arg-type]
    return f"{part}/{entry.decode()}"


M = TypeVar("M", bound=RunRequested | Control)


def stamped(message: M) -> M:
    """The message as it is signed: issued now, with a nonce of its own (a retry is
    stamped again; a request id, not the stamp, makes it the same request)."""
    stamp = {"issued_at": time.time(), "nonce": secrets.token_urlsafe(18)}
    return cast(M, message.model_copy(update=stamp))


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
    ):
        self._app = app
        self._publishers = publishers or Registry(app.settings.publishers_path)
        self._workspaces = Workspaces(app.settings)
        self._on_rejected = on_rejected
        self._r = client
        self._keys = keys
        self._directory = directory
        self._membership = membership
        self._owned: list[int] = []
        self._next_beat = 0.0  # time.monotonic()
        self._slot_reads = SlotReads(client, GROUP, app.worker) if is_cluster(client) else None
        self._nonces: Nonces = RedisNonces(client, keys)  # replays (31.4)
        self._shards_read = keys.shards  # the deployment's shard count, as last read (31.5)
        for part in range(keys.inbox_partitions):
            _ensure_group(client, keys.inbox(part))

    def poll_once(self, *, block_ms: int = 500) -> int:
        now = time.monotonic()
        if now >= self._next_beat:  # not at every entry: a busy inbox wakes us per entry
            self._membership.beat()
            self._owned = self._membership.owned(range(self._keys.inbox_partitions))
            self._next_beat = now + self._membership.ttl_s / BEATS_PER_TTL
        if not self._owned:
            threading.Event().wait(block_ms / 1000)
            return 0
        reply = self._read(block_ms)
        handled = 0
        for stream, entries in reply or []:
            part = self._part_of(stream)
            for entry_id, fields in entries:
                self.handle(part, entry_id, fields or {})
                handled += 1
        return handled

    def _read(self, block_ms: int) -> Any:
        """One XREADGROUP over the owned partitions; on a cluster one per partition (slot)."""
        if self._slot_reads is not None:
            partitions = [self._keys.inbox(p) for p in self._owned]
            return self._slot_reads.read(partitions, count=READ_COUNT, block_ms=block_ms)
        streams: Any = {self._keys.inbox(p): ">" for p in self._owned}
        return self._r.xreadgroup(GROUP, self._app.worker, streams, count=READ_COUNT, block=block_ms)

    def handle(self, part: int, entry_id: bytes, fields: dict[bytes, bytes]) -> str | None:
        """Turn one entry into its outcome and ack it; the rejection reason, if any."""
        cause = f"{part}/{entry_id.decode()}"
        reason: str | None = None
        try:
            max_bytes = self._app.settings.inbox_max_bytes
            by = authenticate(fields, self._publishers, max_bytes=max_bytes)
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
        self._finish(part, entry_id, fields, reason)
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
            self._app.runs.step(
                message.run_id,
                lambda s: _decide_control(s, message, publisher=by.name),
                source=SOURCE,
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
        held = held_scopes(spec.principal.scopes, by.grant)
        spec = spec.model_copy(update={"principal": spec.principal.model_copy(update={"scopes": held})})
        placement = self._workspaces.decide(message, by)  # the server decides where it works
        toolset = message.toolset or self._toolset_for(queue, list(spec.tools))
        try:
            # the workspace rule checked the workspace: no existence probe of a path it refused
            checked = spec if spec.workspace is None else spec.model_copy(update={"workspace": None})
            check_spec(
                checked, message.base_dir, manifest=self._directory.manifest(queue, toolset),
                settings=self._app.settings,  # bounds: the operator's maxima
            )  # fmt: skip
        except InvalidSpec as exc:
            raise Rejected(f"invalid spec: {exc}") from None
        shard = random.randrange(self._keys.shards)
        run_id = message.run_id or new_run_id(shard)
        if message.request_id is not None:
            run_id = self._claim_request(message, by.name, run_id)
        placed = self._workspaces.place(placement, run_id)
        created = RunCreated(
            spec=spec,
            publisher=by.name,
            request_id=message.request_id,
            workspace=placed.path,
            base_dir=message.base_dir,
            queue=queue,
            toolset=toolset,
        )
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

    def _claim_request(self, message: RunRequested, publisher: str, run_id: str) -> str:
        """The run a publisher's request id names: this one if it is new, the one it named
        before if the publisher sends the same request again (stamped anew: the stamp is
        not the request); a different request under it is refused as replayed. Another
        publisher's same request id is another request."""
        assert message.request_id is not None
        asked = message.model_dump_json(exclude={"run_id", "issued_at", "nonce"})
        digest = hashlib.sha256(f"{publisher}\n{asked}".encode()).hexdigest()
        key = self._keys.request(publisher, message.request_id)
        value = f"{run_id} {digest}"
        if self._r.set(key, value, nx=True):
            return run_id
        kept = (cast(bytes | None, self._r.get(key)) or b"").decode().split(" ")
        if len(kept) == 2 and kept[1] == digest:
            return kept[0]  # the same request again: the same run (created, or created now)
        raise Rejected(
            f"{REPLAYED}: request_id {message.request_id!r} names run {kept[0]!r} already, "
            "for another request"
        )

    def _finish(
        self, part: int, entry_id: bytes, fields: dict[bytes, bytes], reason: str | None
    ) -> None:
        with self._r.pipeline(transaction=False) as pipe:
            if reason is not None:
                log.warning("inbox entry %s/%s rejected: %s", part, entry_id.decode(), reason)
                moved: dict[Any, Any] = {"entry_id": f"{part}/{entry_id.decode()}", "reason": reason}
                for k, v in fields.items():
                    name = k.decode(errors="replace")
                    moved[f"field:{name}"] = v[:KEEP_FIELD_BYTES]
                    if len(v) > KEEP_FIELD_BYTES:  # what was cut away is said, not kept
                        moved[f"size:{name}"] = len(v)
                pipe.xadd(self._keys.rejected(part), moved, maxlen=100_000, approximate=True)
                if self._on_rejected is not None:
                    self._on_rejected()
            pipe.xack(self._keys.inbox(part), GROUP, entry_id)
            pipe.xdel(self._keys.inbox(part), entry_id)
            pipe.execute()

    def reclaim_once(self, *, min_idle_ms: int = RECLAIM_IDLE_MS) -> int:
        """Entries an intake took and never acknowledged (it died): handle them here,
        or reject them as poison once they have been delivered too often."""
        n = 0
        for part in self._owned:
            stream = self._keys.inbox(part)
            reply = cast(
                list[Any] | None,
                self._r.xautoclaim(stream, GROUP, self._app.worker, min_idle_ms, "0-0", count=50),
            )
            claimed = cast(list[tuple[bytes, dict[bytes, bytes]]], reply[1] if reply else [])
            for entry_id, fields in claimed:
                n += 1
                pending = cast(
                    list[dict[str, Any]], self._r.xpending_range(stream, GROUP, entry_id, entry_id, 1)
                )
                times = int(pending[0]["times_delivered"]) if pending else 1
                if not fields:
                    self._finish(part, entry_id, {}, None)  # trimmed away: nothing left to do
                elif times > MAX_DELIVERIES:
                    self._finish(part, entry_id, fields, f"poison: delivered {times} times without an answer")
                else:
                    self.handle(part, entry_id, fields)
        return n

    def run(self, stop: threading.Event) -> None:
        polls = 0
        while not stop.is_set():
            self.poll_once()
            polls += 1
            if polls % RECLAIM_EVERY == 0:
                self.reclaim_once()

    def _part_of(self, stream: bytes | str) -> int:
        name = stream.decode() if isinstance(stream, bytes) else stream
        return next(p for p in range(self._keys.inbox_partitions) if self._keys.inbox(p) == name)


def _ensure_group(client: redis.Redis, stream: str) -> None:
    try:
        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _decide_control(s: RunState, m: Control, *, publisher: str) -> list[Event]:
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
