"""Where a run's commands go: the stream of the command's pool, in the run's task
queue, for the run's tool set, in the run's shard — as the dramatiq message
the pool's actor takes. The writer hands these to the store's append (queued
with its events, atomically); `send` pushes messages on their own (the
lock grants told to the run that waited); `Resend` pushes the sweeper's
re-drives, each only where no message for the same command still waits to be
taken (`resend.lua`), so the lag an autoscaler reads counts steps, not re-drives."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from importlib.resources import files
from typing import Any, assert_never

import redis
from dramatiq import get_encoder
from dramatiq.errors import DecodeError
from dramatiq.message import generate_unique_id

from agentledger.events.commands import (
    Command,
    DriveCall,
    DriveFlow,
    Pool,
    RequestModel,
    ResolveCall,
    RunAcceptance,
    StopChild,
)
from agentledger.events.state import RunState
from agentledger.services.adapters.broker.streams_queue import GROUP
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.keys import Keys

_RESEND = files("agentledger.services.adapters.broker").joinpath("resend.lua").read_text()
TENANT = "al_tenant"  # the message option naming its run's tenant
RESEND_SCAN_MAX = 2_000  # messages waiting in a stream beyond which a re-drive waits
log = logging.getLogger(__name__)

ACTORS: dict[type[Command], str] = {
    RequestModel: "request_model",
    DriveCall: "drive_call",
    ResolveCall: "resolve_call",
    RunAcceptance: "run_acceptance",
    DriveFlow: "drive_flow",
    StopChild: "stop_child",
}


def queue_name(pool: Pool | str, queue: str, toolset: str) -> str:
    """The dramatiq queue name of one pool of a task queue for one tool set."""
    return f"{pool}.{queue}.{toolset}"


def args_of(command: Command) -> tuple[Any, ...]:
    match command:
        case RequestModel(run_id) | RunAcceptance(run_id) | DriveFlow(run_id) | StopChild(run_id):
            return (run_id,)
        case DriveCall(run_id, call_id) | ResolveCall(run_id, call_id):
            return (run_id, call_id)
        case _:
            assert_never(command)


def command_key(data: bytes) -> str | None:
    """The command a message carries, as `resend.lua` keys it (its actor and
    arguments joined by NUL); None for a message that is not a command's."""
    try:
        fields: Any = get_encoder().decode(data)
    except DecodeError:
        return None
    if not isinstance(fields, dict):
        return None
    actor, args = fields.get("actor_name"), fields.get("args")
    if not isinstance(actor, str) or not isinstance(args, list):
        return None
    return "\0".join([actor, *(str(a) for a in args)])


def encoded(name: str, command: Command, tenant: str | None = None) -> bytes:
    """The command as dramatiq's message to the pool's actor on queue `name`: the bytes
    `Message(...).encode()` makes (its fields, in its order, a new id and timestamp),
    without making a Message first (its dataclass costs more than the encoding). The
    run's `tenant` rides in its options (`TENANT`): a consumer's threads take turns by
    tenant among the messages it has read ahead (`agentledger.events.thread_turns`)."""
    fields = {
        "queue_name": name,
        "actor_name": ACTORS[type(command)],
        "args": args_of(command),
        "kwargs": {},
        "options": {} if tenant is None else {TENANT: tenant},
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
        data = encoded(name, command, s.spec.principal.tenant)
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


class Resend:
    """The sweeper's re-drives on Redis: per stream, one script call that sends
    each message only when no message for its command still waits there to be
    taken, queued or delayed (`resend.lua`: one delivered and not acked gets one
    copy, for any free worker); a stream with more than `scan_max` messages gets
    none this time."""

    def __init__(self, client: redis.Redis, keys: Keys, *, scan_max: int = RESEND_SCAN_MAX):
        self._keys = keys
        self._scan_max = scan_max
        self._script = client.register_script(_RESEND)

    def __call__(self, messages: Sequence[Outgoing]) -> None:
        streams: dict[str, list[Outgoing]] = {}
        for m in messages:
            streams.setdefault(m.stream, []).append(m)
        for stream, batch in streams.items():
            args: list[Any] = [GROUP, self._scan_max]
            for m in batch:
                args += [command_key(m.data) or "", m.data]
            keys = [stream, self._keys.queue_delayed(stream)]
            if self._script(keys=keys, args=args) == -1:
                log.info(
                    "re-drives to %s wait: over %d messages wait there", stream, self._scan_max
                )
