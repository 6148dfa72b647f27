"""Where a run's commands go: the stream of the command's pool, in the run's task
queue, for the run's tool set, in the run's shard — as the dramatiq message
the pool's actor takes. The writer hands these to the store's append (queued
with its events, atomically); `send` pushes messages on their own (the
sweeper's re-drives, lock grants told to the run that waited)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
from dramatiq.message import Message

from events.commands import Command, DriveCall, Pool, RequestModel, ResolveCall, RunAcceptance
from events.state import RunState
from services.adapters.store.port import Outgoing
from services.keys import Keys

ACTORS: dict[type[Command], str] = {
    RequestModel: "request_model",
    DriveCall: "drive_call",
    ResolveCall: "resolve_call",
    RunAcceptance: "run_acceptance",
}


def queue_name(pool: Pool | str, queue: str, toolset: str) -> str:
    """The dramatiq queue name of one pool of a task queue for one tool set."""
    return f"{pool}.{queue}.{toolset}"


def args_of(command: Command) -> tuple[Any, ...]:
    match command:
        case RequestModel(run_id) | RunAcceptance(run_id):
            return (run_id,)
        case DriveCall(run_id, call_id) | ResolveCall(run_id, call_id):
            return (run_id, call_id)


class Outbox:
    def __init__(self, keys: Keys):
        self._keys = keys

    def stream(self, s: RunState, pool: Pool) -> str:
        return self._keys.queue(self._keys.shard(s.run_id), s.queue, s.toolset, str(pool))

    def message(self, s: RunState, command: Command) -> Outgoing:
        name = queue_name(command.pool, s.queue, s.toolset)
        data = Message(
            queue_name=name,
            actor_name=ACTORS[type(command)],
            args=args_of(command),
            kwargs={},
            options={},
        ).encode()
        return Outgoing(self.stream(s, command.pool), data)

    def messages(self, s: RunState, commands: Sequence[Command]) -> list[Outgoing]:
        return [self.message(s, c) for c in commands]


def send(client: redis.Redis, messages: Sequence[Outgoing]) -> None:
    """Push messages outside an append, in one round trip."""
    if not messages:
        return
    with client.pipeline(transaction=False) as pipe:
        for m in messages:
            pipe.xadd(m.stream, {"m": m.data})
        pipe.execute()
