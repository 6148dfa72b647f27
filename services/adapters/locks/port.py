"""The lock table port: one owner of the table (an atomic script on Redis, a lock
in memory) that applies the rule of `agentledger.events.locks`. A request names who asked
(run, call) and the message to send them if it is granted later — by a
release or an expiry, not by their own ask — so a grant reaches the waiting
run through a command to its own queue, and nobody appends to another run's
log. Times are the table's own (Redis `TIME`).

The table may be partitioned by resource (`agentledger.events.lock_partitions`); callers
see no difference but this: a release or a renewal names the request's keys
(`LockAsk`), so it goes only to the partitions the request is in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Grant
from agentledger.services.adapters.store.port import Outgoing


@dataclass(frozen=True, slots=True)
class Holder:
    request_id: str
    run_id: str
    call_id: str


@dataclass(frozen=True, slots=True)
class Granted:
    grant: Grant
    holder: Holder
    notify: Outgoing | None  # the message that tells the waiting call


@dataclass(frozen=True, slots=True)
class KeyLook:
    holders: int
    closed_until: float | None  # the table's time (seconds); None: open


@dataclass(frozen=True)
class LockReply:
    grants: list[Granted] = field(default_factory=list)
    expired: list[Holder] = field(default_factory=list)
    renewed: bool = False
    told: list[Outgoing] = field(default_factory=list)  # waiters to tell of a closed key

    def notices(self) -> list[Outgoing]:
        return [g.notify for g in self.grants if g.notify is not None] + self.told


class Locks(Protocol):
    lease_s: float

    def enqueue(self, asks: Sequence[LockAsk], notify: Sequence[Outgoing | None]) -> LockReply:
        """Queue the requests in order; the reply lists every grant made, including
        those asked for again (a redelivery learns what it had been given)."""
        ...

    def release(self, asks: Sequence[LockAsk]) -> LockReply:
        """Drop requests, held or waiting, from every partition their keys are in;
        unknown ids change nothing. The reply lists the requests this let through."""
        ...

    def renew(self, ask: LockAsk) -> bool:
        """Extend a held request's lease (it is in the partition of its last keys)."""
        ...

    def expire(self) -> LockReply:
        """Holders whose lease ran out lose their locks; the lock passes on."""
        ...

    def close(self, keys: Mapping[str, float]) -> LockReply:
        """Close slot keys for that many seconds, for every run (a later end wins):
        the expiry pass that finds a closure over reopens the key and grants its waiters.
        The reply tells the requests waiting on them (to record that they back off)."""
        ...

    def look(self, keys: Sequence[str]) -> dict[str, KeyLook]:
        """What a key has now: its holders, and until when it is closed."""
        ...
