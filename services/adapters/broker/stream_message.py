"""A message a pool's consumer delivers, and the small helpers its reads use: which
entry it came from, how often it was delivered, the slot it runs with, and whose
turn it is (its run and the run's tenant, `agentledger.events.thread_turns`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from dramatiq.broker import MessageProxy
from dramatiq.errors import ConnectionClosed
from dramatiq.message import Message

from agentledger.services.adapters.broker.budgets import Slot
from agentledger.services.adapters.broker.outbox import TENANT
from agentledger.services.adapters.broker.streams_queue import StreamQueue


class StreamMessage(MessageProxy):
    """A delivered message and where it came from."""

    def __init__(
        self, message: Message[Any], queue: StreamQueue, entry_id: str, deliveries: int
    ) -> None:
        super().__init__(message)
        self.queue = queue
        self.entry_id = entry_id
        self.deliveries = deliveries  # 1 on first delivery; each takeover adds one
        self.slot: Slot | None = None  # its place in its pool's thread budget, once it has one
        # whose turn it is (`agentledger.events.thread_turns`): its run and the run's tenant
        self.id = entry_id
        self.run = str(message.args[0]) if message.args else ""
        tenant = message.options.get(TENANT)
        self.tenant = tenant if isinstance(tenant, str) else ""


def give_back(message: StreamMessage) -> None:
    if message.slot is not None:
        message.slot.release()
        message.slot = None


@contextmanager
def as_broker_errors() -> Iterator[None]:
    """Lost connections as dramatiq's error, which its threads know to retry."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ConnectionClosed(exc) from None  # type: ignore[no-untyped-call]


def per_stream(free: int, streams: int) -> int:
    """COUNT per stream of a read over `streams` streams by a consumer with `free`
    slots (XREADGROUP's COUNT is per stream): about `free` entries in all, at most
    one a stream beyond them, so a process leaves what it cannot start soon to the
    others."""
    return max(1, -(-free // max(1, streams)))


def entry_message(fields: list[bytes] | None) -> bytes:
    """The message field of an entry's flat field list; without one, b"" (undecodable:
    a dead letter, like any other entry nobody could have sent)."""
    pairs = dict(zip(fields[::2], fields[1::2], strict=False)) if fields else {}
    return pairs.get(b"m", b"")


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
