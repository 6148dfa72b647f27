"""The inbox port, as a publisher (the CLI, the web view) uses it. Entry ids are
`partition/publisher/stream id`, as `publish` returns them; an intake reads the
entries (then they are `taken`), appends or refuses each (a refusal's reason is
kept under the entry's id) and deletes it (then it no longer `waiting`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from agentledger.schemas.inbox import Control, RunRequested
from agentledger.services.adapters.publishers.publishers_file import Signer


class Liveness(StrEnum):
    LIVE = "live"  # an intake heartbeated within the membership ttl
    NONE = "none"  # no intake is alive on this Redis and prefix


@dataclass(frozen=True, slots=True)
class WaitingRequest:
    """A run's request still in the inbox: `taken` once an intake read it (the run is
    being created), `age_s` since it was published (the inbox's clock)."""

    run_id: str
    publisher: str
    entry_id: str
    taken: bool
    age_s: float


class Inbox(Protocol):
    def publish(self, message: RunRequested | Control, *, signer: Signer) -> str:
        """Sign and publish the message to the signer's own stream; its entry id."""
        ...

    def withdraw(self, entry_id: str) -> bool:
        """Delete the entry if no intake has read it yet; True when it was deleted."""
        ...

    def taken(self, entry_id: str) -> bool:
        """An intake has read the entry (or it is gone)."""
        ...

    def waiting(self, entry_id: str) -> bool:
        """The entry, or one published before it, is still in its stream (unhandled)."""
        ...

    def newest(self, publisher: str) -> list[str]:
        """The newest entry of each of the publisher's streams (none: nothing waits)."""
        ...

    def rejected_reason(self, entry_id: str) -> str | None:
        """Why the intake refused the entry, if it did."""
        ...

    def refusal_of_run(self, run_id: str) -> tuple[str, str] | None:
        """The newest refusal of an entry that named `run_id`: the reason and the
        publisher whose stream held it."""
        ...

    def request_waiting(self, run_id: str, publishers_path: str) -> WaitingRequest | None:
        """The request for `run_id` waiting in the stream of a publisher of the
        publishers file at `publishers_path`, if one is there."""
        ...

    def intake_liveness(self, *, ttl_s: float, publisher: str | None = None) -> Liveness:
        """Live when a deployment intake (or an embedded intake of `publisher`)
        heartbeated within `ttl_s`."""
        ...
