"""The reactor: reads the shard feeds through a consumer group, folds each run
that moved, and sends the commands that are due. It appends nothing; sending a
command twice is harmless because handlers re-check before acting.

One round trip per wake in the common case: the previous batch is acked in the
same pipeline as the next read, the runs that moved are loaded together, and
a run whose cached state ends at the event its feed entry names (this
process appended it) is not read at all."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import redis

from events.commands import Command
from events.dispatch import due_commands
from events.errors import CoreError
from events.state import RunState
from schemas.errors import SchemaError
from services.handlers.app import App
from services.handlers.steps import load_many
from services.keys import Keys

GROUP = "reactor"
log = logging.getLogger(__name__)


def ensure_group(client: redis.Redis, stream: str, group: str) -> None:
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


class Reactor:
    def __init__(
        self,
        app: App,
        client: redis.Redis,
        keys: Keys,
        send: Callable[[Command], None],
        batch: Callable[[], AbstractContextManager[None]] = nullcontext,
    ):
        self._app = app
        self._r = client
        self._keys = keys
        self._send = send
        self._batch = batch  # the sends of one wake go out together (a broker's `batched`)
        self._streams = [keys.feed(s) for s in range(keys.shards)]
        self._unacked: list[tuple[bytes, list[bytes]]] = []
        for stream in self._streams:
            ensure_group(client, stream, GROUP)

    def poll_once(self, *, block_ms: int = 1000, count: int = 200) -> int:
        # the last batch's acks go in the same round trip as the next read
        pipe = self._r.pipeline(transaction=False)
        for stream, ids in self._unacked:
            pipe.xack(stream, GROUP, *ids)
        streams = {s: ">" for s in self._streams}
        pipe.xreadgroup(GROUP, self._app.worker, streams, count=count, block=block_ms)  # type: ignore[arg-type]
        reply = pipe.execute()[-1]
        self._unacked = []
        ends: dict[str, tuple[int, str]] = {}
        for stream, entries in reply or []:
            self._unacked.append((stream, [entry_id for entry_id, _ in entries]))
            for _, fields in entries:
                run_id = fields[b"run"].decode()
                ends.pop(run_id, None)  # keep the runs in the order they last moved
                if b"id" in fields:  # feeds written by older code carry no event id
                    ends[run_id] = (int(fields[b"seq"]), fields[b"id"].decode())
                else:
                    ends[run_id] = (0, "")
        if ends:
            self.react(list(ends), ends=ends)
        return sum(len(ids) for _, ids in self._unacked)

    def flush_acks(self) -> None:
        pipe = self._r.pipeline(transaction=False)
        for stream, ids in self._unacked:
            pipe.xack(stream, GROUP, *ids)
        pipe.execute()
        self._unacked = []

    def react(self, run_ids: list[str], *, ends: dict[str, tuple[int, str]] | None = None) -> None:
        """Send what is due for each run. Their states are read in one go, except those
        this process holds already at the seq and event the feed says they end at."""
        try:
            states = load_many(self._app.store, run_ids, ends=ends)
        except (CoreError, SchemaError):  # one broken log must not stop every run
            states = [self._load_alone(run_id) for run_id in run_ids]
        now = self._app.clock.now()
        with self._batch():
            for state in states:
                for command in due_commands(state, now=now) if state else []:
                    self._send(command)

    def _load_alone(self, run_id: str) -> RunState | None:
        try:
            return load_many(self._app.store, [run_id])[0]
        except (CoreError, SchemaError) as exc:
            log.error("run %r cannot be folded, not dispatched: %s", run_id, exc)
            return None

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.poll_once(block_ms=500)
        finally:
            try:
                self.flush_acks()
            except redis.RedisError:
                pass  # unacked feed entries are never read again by this group: harmless
