"""How a publisher writes to the inbox: the partition of a message (by its request
or run id), the message as it is signed (stamped), one XADD to the publisher's own
stream of that partition, and the entry's id everywhere it is named,
`partition/publisher/stream id`. The intake (`agentledger.services.loops.intake`) reads with
the `GROUP` named here."""

from __future__ import annotations

import hashlib
import random
import secrets
import time
from typing import TypeVar, cast

import redis

from agentledger.schemas.inbox import Control, RunRequested
from agentledger.schemas.signature import entry as signed_entry
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.keys import Keys

GROUP = "intake"  # the intakes' consumer group on every inbox stream


def partition_of(key: str, partitions: int) -> int:
    """The inbox partition of a request id (or of the run id, with none)."""
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % partitions


def partition_for(message: RunRequested | Control, partitions: int) -> int:
    """A message's partition: by its request id, else its run id, else at random."""
    key = getattr(message, "request_id", None) or getattr(message, "run_id", None)
    return partition_of(key, partitions) if key else random.randrange(partitions)


def publish(
    client: redis.Redis, keys: Keys, message: RunRequested | Control, *, signer: Signer
) -> str:
    """What any publisher does: one XADD of the message as JSON, signed with its
    key, to its own stream of a partition chosen by its request id (or at random).
    Returns the entry's id, `partition/publisher/stream id`."""
    part = partition_for(message, keys.inbox_partitions)
    fields = signed_entry(signer.name, signer.key, stamped(message).model_dump_json().encode())
    entry = cast(bytes, client.xadd(keys.inbox(part, signer.name), fields))  # type: ignore[arg-type]
    return entry_name(part, signer.name, entry.decode())


def entry_name(part: int, publisher: str, stream_id: str) -> str:
    """An inbox entry's id everywhere it is named (rejections, causation ids):
    `partition/publisher/stream id`."""
    return f"{part}/{publisher}/{stream_id}"


M = TypeVar("M", bound=RunRequested | Control)


def stamped(message: M) -> M:
    """The message as it is signed: issued now, with a nonce of its own (a retry is
    stamped again; a request id, not the stamp, makes it the same request)."""
    stamp = {"issued_at": time.time(), "nonce": secrets.token_urlsafe(18)}
    return cast(M, message.model_copy(update=stamp))
