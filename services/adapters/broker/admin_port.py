"""The broker's admin port, what `workers --list` and `dead-letters` ask: the task
queues, the live workers of each pool with the messages each holds, the dead
letters (messages a queue gave up on), and re-driving one back to its queue.
The Redis adapter is `redis_admin`, its memory twin `memory_admin`; both pass
the same contract suite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agentledger.events.commands import Pool


@dataclass(frozen=True, slots=True)
class Worker:
    worker: str
    queue: str
    toolset: str
    modules: list[str]
    pools: list[str]
    in_flight: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    handle: str  # queue:toolset:pool:shard:entry, what --redrive takes
    queue: str
    toolset: str
    pool: str
    shard: int
    entry: str
    reason: str
    deliveries: int
    actor: str
    run_id: str | None


class BrokerAdmin(Protocol):
    def queues(self) -> list[str]:
        """Every task queue a worker has ever registered a tool set under."""
        ...

    def members(self) -> list[Worker]:
        """The live workers of every queue and tool set, with the messages each holds."""
        ...

    def manifest(self, queue: str, toolset: str) -> dict[str, Any] | None:
        """The manifest of a tool set that served the queue (None: none ever did)."""
        ...

    def live(self, queue: str, toolset: str, pool: Pool | str = Pool.MODEL) -> list[str]:
        """The workers of one pool of a queue's tool set heard from within the membership ttl."""
        ...

    def dead_letters(self, queue: str | None = None) -> list[DeadLetter]:
        """The dead letters of one queue (None: of every queue)."""
        ...

    def redrive(self, queue: str, toolset: str, pool: str, shard: int, entry: str) -> bool:
        """Move the dead letter back to its queue in one step; False when it is not there."""
        ...


def dead_letter(
    queue: str, toolset: str, pool: str, shard: int, entry_id: str, fields: dict[bytes, bytes]
) -> DeadLetter:
    """A dead letter as the admin shows it, from its stored fields."""
    actor, run_id = _what(fields.get(b"m", b""))
    return DeadLetter(
        handle=f"{queue}:{toolset}:{pool}:{shard}:{entry_id}",
        queue=queue, toolset=toolset, pool=pool, shard=shard, entry=entry_id,
        reason=fields.get(b"reason", b"?").decode(errors="replace"),
        deliveries=int(fields.get(b"deliveries", b"0") or 0),
        actor=actor, run_id=run_id,
    )  # fmt: skip


def _what(data: bytes) -> tuple[str, str | None]:
    """The actor and run a message is for; '?' when it cannot be decoded."""
    from dramatiq import Message  # here: a read command imports no broker until it shows letters

    try:
        message: Message[Any] = Message.decode(data)
    except Exception:  # noqa: BLE001 - an undecodable letter is shown, not raised
        return "?", None
    run_id = message.args[0] if message.args and isinstance(message.args[0], str) else None
    return message.actor_name, run_id
