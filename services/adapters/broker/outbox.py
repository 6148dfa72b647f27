"""Where a run's commands go: the stream of the command's pool, in the run's task
queue, for the run's tool set, in the run's shard — as the dramatiq message
the pool's actor takes. The writer hands these to the store's append (queued
with its events, atomically); `send` pushes messages on their own (the
sweeper's re-drives, lock grants told to the run that waited)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, assert_never

import redis
from dramatiq import get_encoder
from dramatiq.message import generate_unique_id

from agentledger.events.commands import (
    Command,
    DriveCall,
    Pool,
    RequestModel,
    ResolveCall,
    RunAcceptance,
)
from agentledger.events.state import RunState
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.keys import Keys

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
        case _:
            assert_never(command)


def encoded(name: str, command: Command) -> bytes:
    """The command as dramatiq's message to the pool's actor on queue `name`: the bytes
    `Message(...).encode()` makes (its fields, in its order, a new id and timestamp),
    without making a Message first (its dataclass costs more than the encoding)."""
    fields = {
        "queue_name": name,
        "actor_name": ACTORS[type(command)],
        "args": args_of(command),
        "kwargs": {},
        "options": {},
        "message_id": generate_unique_id(),
        "message_timestamp": int(time.time() * 1000),
    }
    return get_encoder().encode(fields)


class Outbox:
    def __init__(self, keys: Keys):
        self._keys = keys

    def stream(self, s: RunState, pool: Pool) -> str:
        return self._keys.queue(self._keys.shard(s.run_id), s.queue, s.toolset, str(pool))

    def message(self, s: RunState, command: Command) -> Outgoing:
        name = queue_name(command.pool, s.queue, s.toolset)
        return Outgoing(self.stream(s, command.pool), encoded(name, command))

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
