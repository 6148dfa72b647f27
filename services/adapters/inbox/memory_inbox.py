"""The inbox in memory, for unit tests: streams per partition and publisher,
the intake group's read position, the refusals and the intakes' heartbeats on
an injected clock. Its `intake_*` methods play the intake's side. It passes
the same contract suite as the Redis inbox."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from agentledger.schemas.inbox import Control, RunRequested
from agentledger.services.adapters.inbox.port import Liveness, WaitingRequest
from agentledger.services.adapters.inbox.publishing import entry_name, partition_for, stamped
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.errors import ConfigError

ALL = ""  # the deployment intakes' heartbeats (an embedded intake's: its publisher)


@dataclass
class _Stream:
    entries: dict[int, str] = field(default_factory=dict)  # stream seq -> message JSON
    read_upto: int = 0  # the intake group's last delivered seq


class MemoryInbox:
    def __init__(self, *, partitions: int = 4, clock: Callable[[], float]) -> None:
        self._partitions = partitions
        self._clock = clock
        self._streams: dict[tuple[int, str], _Stream] = {}
        self._next = 0
        self._published_at: dict[int, float] = {}
        self._refusals: list[tuple[str, str, str]] = []  # (entry id, reason, message), oldest first
        self._beats: dict[str, float] = {}
        self._lock = threading.Lock()

    def publish(self, message: RunRequested | Control, *, signer: Signer) -> str:
        part = partition_for(message, self._partitions)
        with self._lock:
            self._next += 1
            stream = self._streams.setdefault((part, signer.name), _Stream())
            stream.entries[self._next] = stamped(message).model_dump_json()
            self._published_at[self._next] = self._clock()
            return entry_name(part, signer.name, self._stream_id(self._next))

    def withdraw(self, entry_id: str) -> bool:
        stream, seq = self._find(entry_id)
        with self._lock:
            if stream is None or seq <= stream.read_upto or seq not in stream.entries:
                return False
            del stream.entries[seq]
            return True

    def taken(self, entry_id: str) -> bool:
        stream, seq = self._find(entry_id)
        return stream is not None and seq <= stream.read_upto

    def waiting(self, entry_id: str) -> bool:
        stream, seq = self._find(entry_id)
        return stream is not None and any(s <= seq for s in stream.entries)

    def newest(self, publisher: str) -> list[str]:
        with self._lock:
            return [
                entry_name(part, name, self._stream_id(max(s.entries)))
                for (part, name), s in sorted(self._streams.items())
                if name == publisher and s.entries
            ]

    def rejected_reason(self, entry_id: str) -> str | None:
        with self._lock:
            return next((r for e, r, _ in reversed(self._refusals) if e == entry_id), None)

    def refusal_of_run(self, run_id: str) -> tuple[str, str] | None:
        needle = f'"run_id":"{run_id}"'
        with self._lock:
            for entry_id, reason, message in reversed(self._refusals):
                if needle in message:
                    return reason, entry_id.split("/", 2)[1]
        return None

    def request_waiting(self, run_id: str, publishers_path: str) -> WaitingRequest | None:
        try:
            names = set(publishers_file.read(publishers_path).publishers)
        except ConfigError:
            return None
        with self._lock:
            found = [
                (part, name, seq, stream.read_upto >= seq)
                for (part, name), stream in self._streams.items() if name in names
                for seq, message in stream.entries.items() if _requests(message, run_id)
            ]  # fmt: skip
        if not found:
            return None
        part, name, seq, taken = found[-1]
        entry = entry_name(part, name, self._stream_id(seq))
        return WaitingRequest(
            run_id, name, entry, taken, max(0.0, self._clock() - self._published_at[seq])
        )

    def intake_liveness(self, *, ttl_s: float, publisher: str | None = None) -> Liveness:
        now = self._clock()
        with self._lock:
            beats = [self._beats.get(ALL), *([self._beats.get(publisher)] if publisher else [])]
        live = any(at is not None and at >= now - ttl_s for at in beats)
        return Liveness.LIVE if live else Liveness.NONE

    # the intake's side
    def intake_read(self) -> None:
        """The intake group reads every entry waiting."""
        with self._lock:
            for stream in self._streams.values():
                stream.read_upto = max([stream.read_upto, *stream.entries])

    def intake_refuse(self, entry_id: str, reason: str) -> None:
        """The intake refuses the entry (keeping its reason and message) and deletes it."""
        stream, seq = self._find(entry_id)
        with self._lock:
            message = stream.entries.pop(seq, "") if stream is not None else ""
            self._refusals.append((entry_id, reason, message))

    def intake_handled(self, entry_id: str) -> None:
        stream, seq = self._find(entry_id)
        with self._lock:
            if stream is not None:
                stream.entries.pop(seq, None)

    def intake_beat(self, publisher: str | None = None) -> None:
        with self._lock:
            self._beats[publisher or ALL] = self._clock()

    def _stream_id(self, seq: int) -> str:
        return f"{seq}-0"  # the memory inbox's stream ids: its publish count

    def _find(self, entry_id: str) -> tuple[_Stream | None, int]:
        part, publisher, stream_id = entry_id.split("/", 2)
        with self._lock:
            return self._streams.get((int(part), publisher)), int(stream_id.partition("-")[0])


def _requests(message: str, run_id: str) -> bool:
    data = json.loads(message)
    return (
        isinstance(data, dict)
        and data.get("type") == "RunRequested"
        and data.get("run_id") == run_id
    )
