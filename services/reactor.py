"""The reactor: reads the shard feeds through a consumer group, folds each run
that moved, and sends the commands that are due. It appends nothing; sending a
command twice is harmless because handlers re-check before acting."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis

from events.commands import Command
from events.dispatch import due_commands
from events.errors import CoreError
from schemas.errors import SchemaError
from services.app import App
from services.keys import Keys
from services.steps import load

GROUP = "reactor"
log = logging.getLogger(__name__)


def ensure_group(client: redis.Redis, stream: str, group: str) -> None:
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


class Reactor:
    def __init__(self, app: App, client: redis.Redis, keys: Keys, send: Callable[[Command], None]):
        self._app = app
        self._r = client
        self._keys = keys
        self._send = send
        self._streams = [keys.feed(s) for s in range(keys.shards)]
        for stream in self._streams:
            ensure_group(client, stream, GROUP)

    def poll_once(self, *, block_ms: int = 1000, count: int = 200) -> int:
        reply = self._r.xreadgroup(
            GROUP, self._app.worker, {s: ">" for s in self._streams}, count=count, block=block_ms
        )
        if not reply:
            return 0
        runs: dict[str, None] = {}
        acks: list[tuple[bytes, list[bytes]]] = []
        for stream, entries in reply:
            acks.append((stream, [entry_id for entry_id, _ in entries]))
            for _, fields in entries:
                runs[fields[b"run"].decode()] = None
        for run_id in runs:
            self.react(run_id)
        pipe = self._r.pipeline(transaction=False)
        for stream, ids in acks:
            pipe.xack(stream, GROUP, *ids)
        pipe.execute()
        return sum(len(ids) for _, ids in acks)

    def react(self, run_id: str) -> None:
        try:
            state = load(self._app.store, run_id)
        except (CoreError, SchemaError) as exc:  # one broken log must not stop every run
            log.error("run %r cannot be folded, not dispatched: %s", run_id, exc)
            return
        if state is None:
            return
        for command in due_commands(state, now=self._app.clock.now()):
            self._send(command)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.poll_once(block_ms=500)
