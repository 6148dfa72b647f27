"""An inbox entry as the intake handles it, and what becomes of anything an
entry's handling raised: `Rejected` is its reason; a broken run log, a bad
schema, a service error says what it was; a bug is logged and named (it must
not wedge the intake, nor fail the other entries of the batch); a lost Redis
is not the entry's fault and is raised, so nothing is acknowledged and the
entry is handled again."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import redis

from agentledger.events.errors import CoreError
from agentledger.schemas.errors import SchemaError
from agentledger.schemas.json_limits import check_depth
from agentledger.services.adapters.inbox.publishing import entry_name
from agentledger.services.adapters.redis.replicas import NotReplicated
from agentledger.services.errors import ServiceError
from agentledger.services.loops.inbox_parse import Rejected

log = logging.getLogger("agentledger.services.loops.intake")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a publisher's stream of an inbox partition."""

    part: int
    publisher: str
    entry_id: bytes
    fields: dict[bytes, bytes]

    @property
    def cause(self) -> str:
        """Its name (`partition/publisher/stream id`): the cause of what it appends."""
        return entry_name(self.part, self.publisher, self.entry_id.decode())


def reason_of(outcome: object, cause: str | None) -> str | None:
    """The rejection reason of what an entry's handling came to (None: it did what
    it asked); a lost Redis is raised."""
    if not isinstance(outcome, BaseException):
        return None
    if isinstance(outcome, Rejected):
        return outcome.reason
    if isinstance(outcome, (redis.ConnectionError, redis.TimeoutError, NotReplicated)):
        raise outcome  # not the entry's fault: it stays pending and is handled again
    if isinstance(outcome, (CoreError, SchemaError, ServiceError)):  # e.g. the run's log is broken
        return f"{type(outcome).__name__}: {outcome}"
    if isinstance(outcome, redis.ResponseError):  # what Redis said to this entry's own command
        return f"{type(outcome).__name__}: {outcome}"
    log.error("inbox entry %s could not be handled", cause or "(batch)", exc_info=outcome)
    return f"internal error: {type(outcome).__name__}: {outcome}"


def attempt(cause: str | None, fn: Callable[[], T]) -> tuple[T | None, str | None]:
    """`fn()` and None, or None and the reason it refused the entry."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 -- named by reason_of; a lost Redis raised there
        return None, reason_of(exc, cause)


def whose(entry: Entry, max_bytes: int) -> tuple[bool, str]:
    """Whether an entry is a control, and whose it is — its stream's publisher and the
    tenant its run request names — read without any check, only to take a window's
    requests in turn (`agentledger.events.admission.window_order`); an entry that
    cannot be read so is a request of its publisher's alone (its handling rejects it).
    A stream is its publisher's own (the intake rejects an entry another signed), so a
    publisher that names another's tenant takes turns with its own requests only."""
    raw = entry.fields.get(b"message")
    tenant = ""
    if raw is not None and len(raw) <= max_bytes:
        try:
            check_depth(raw.decode("utf-8"))
            data = json.loads(raw)
            if data.get("type") != "RunRequested":
                return True, entry.publisher
            tenant = str(data["spec"]["principal"]["tenant"])
        except Exception:  # noqa: BLE001 -- only an order: the entry's handling says what is wrong
            tenant = ""
    return False, f"{entry.publisher}\0{tenant}"
