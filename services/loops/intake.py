"""The intake: reads the inbox stream where any system publishes task events
(JSON in the entry's `message` field). A valid RunRequested becomes the run's
first event; anything else is moved to the rejected stream with its reason and
the original fields. A bad entry never stops the intake."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

import redis
from pydantic import TypeAdapter, ValidationError

from events import controls
from events.errors import ControlRefused, CoreError
from events.state import RunState
from events.types import Event, RunCreated
from schemas import inbox
from schemas.errors import InvalidSpec, SchemaError
from schemas.inbox import Control, InboxMessage, RunRequested
from services.clock import new_run_id
from services.errors import ConcurrencyConflict, ServiceError
from services.handlers.app import App
from services.handlers.spec_check import check_spec
from services.handlers.steps import envelopes, load, run_step
from services.keys import Keys
from services.loops.reactor import ensure_group

GROUP = "intake"
RECLAIM_EVERY = 20  # polls of at most 0.5 s: look for a dead intake's entries every ~10 s
SOURCE = "intake"
_MESSAGE = TypeAdapter(InboxMessage)
log = logging.getLogger(__name__)


class Rejected(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def publish(client: redis.Redis, keys: Keys, message: RunRequested | Control) -> str:
    """What any publisher does: one XADD of the message as JSON."""
    return client.xadd(keys.inbox, {"message": message.model_dump_json()}).decode()


class Intake:
    def __init__(self, app: App, client: redis.Redis, keys: Keys):
        self._app = app
        self._r = client
        self._keys = keys
        ensure_group(client, keys.inbox, GROUP)

    def poll_once(self, *, block_ms: int = 1000, count: int = 50) -> int:
        reply = self._r.xreadgroup(
            GROUP, self._app.worker, {self._keys.inbox: ">"}, count=count, block=block_ms
        )
        handled = 0
        for _, entries in reply or []:
            for entry_id, fields in entries:
                self._handle(entry_id, fields)
                handled += 1
        return handled

    def _handle(self, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        try:
            message = _parse(fields)
            if isinstance(message, RunRequested):
                self.accept(message, causation_id=entry_id.decode())
            else:
                self.control(message, causation_id=entry_id.decode())
        except Rejected as r:
            self._reject(entry_id, fields, r.reason)
        except (CoreError, SchemaError, ServiceError) as exc:  # e.g. the run's log is broken
            self._reject(entry_id, fields, f"{type(exc).__name__}: {exc}")
        self._r.xack(self._keys.inbox, GROUP, entry_id)

    def control(self, message: Control, *, causation_id: str | None = None) -> None:
        """Append what a person or system said to a run, if it fits the run's state."""
        state = load(self._app.store, message.run_id)
        if state is None:
            raise Rejected(f"no run {message.run_id!r}")
        try:
            run_step(
                self._app.store,
                self._app.clock,
                message.run_id,
                lambda s: _decide_control(s, message),
                source=SOURCE,
                causation_id=causation_id,
                held=state,
            )
        except ControlRefused as exc:
            raise Rejected(exc.reason) from None

    def accept(self, message: RunRequested, *, causation_id: str | None = None) -> str:
        """Append the run's first event; returns the run id."""
        spec = message.spec
        try:
            check_spec(spec, message.base_dir, self._app.registry)
        except InvalidSpec as exc:
            raise Rejected(f"invalid spec: {exc}") from None
        run_id = message.run_id or new_run_id()
        workspace = message.workspace or _resolve(spec.workspace, message.base_dir)
        created = RunCreated(
            spec=spec, request_id=message.request_id, workspace=workspace, base_dir=message.base_dir
        )
        batch = envelopes(
            run_id,
            [created],
            after_seq=0,
            at=self._app.clock.now(),
            source=SOURCE,
            causation_id=causation_id,
        )
        try:
            self._app.store.append(run_id, batch, expected_seq=0, live=True)
        except ConcurrencyConflict:
            existing = load(self._app.store, run_id)
            first = existing and existing.request_id
            if message.request_id is None or first != message.request_id:
                raise Rejected(f"run {run_id!r} exists already") from None
        return run_id

    def _reject(self, entry_id: bytes, fields: dict[bytes, bytes], reason: str) -> None:
        log.warning("inbox entry %s rejected: %s", entry_id.decode(), reason)
        moved: dict[str, Any] = {"entry_id": entry_id, "reason": reason}
        moved.update({f"field:{k.decode(errors='replace')}": v for k, v in fields.items()})
        self._r.xadd(self._keys.rejected, moved)

    def reclaim_once(self, *, min_idle_ms: int = 10_000) -> int:
        """Entries an intake took and never acknowledged (it died): handle them here.
        Handling is idempotent (a run's first append is at seq 0; controls re-check)."""
        reply = self._r.xautoclaim(
            self._keys.inbox, GROUP, self._app.worker, min_idle_ms, start_id="0-0", count=50
        )
        entries = reply[1] if reply else []
        for entry_id, fields in entries:
            if fields:  # None when the entry was trimmed away
                self._handle(entry_id, fields)
        return len(entries)

    def run(self, stop: threading.Event) -> None:
        polls = 0
        while not stop.is_set():
            self.poll_once(block_ms=500)
            polls += 1
            if polls % RECLAIM_EVERY == 0:
                self.reclaim_once()


def _decide_control(s: RunState, m: Control) -> list[Event]:
    match m:
        case inbox.RunCancelRequested():
            return controls.cancel(s, by=m.by, source="inbox", reason=m.reason)
        case inbox.ApprovalGranted():
            return controls.approve(s, m.call_id, by=m.by, note=m.note)
        case inbox.ApprovalDenied():
            return controls.deny(s, m.call_id, by=m.by, note=m.note)
        case inbox.HumanReplied():
            return controls.reply(s, by=m.by, text=m.text)
        case inbox.RunResumed():
            return controls.resume(s, by=m.by, note=m.note)
        case inbox.RunAborted():
            return controls.abort(s, by=m.by, note=m.note)


def _parse(fields: dict[bytes, bytes]) -> RunRequested | Control:
    raw = fields.get(b"message")
    if raw is None:
        raise Rejected("no 'message' field")
    try:
        return _MESSAGE.validate_python(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise Rejected(f"message is not JSON: {exc}") from None
    except UnicodeDecodeError:
        raise Rejected("message is not UTF-8 text") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(message)"
        raise Rejected(f"{where}: {err['msg']}") from None


def _resolve(path: str | None, base_dir: str | None) -> str | None:
    if path is None:
        return None
    return os.path.abspath(os.path.join(base_dir or os.getcwd(), path))
