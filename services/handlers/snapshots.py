"""A run's snapshot as the state cache (`state_cache`) writes and reads it: the
format's version, `encode` (the state's header, its tail turns packed apart, the
pages of past turns not saved yet, the spec once), `decode` (the header, the full
pages it names read in one call, the spec validated once per process for the same
bytes: `spec_of`), the past turns packed once each (`PackedTurns`), and
`warm_up`, which a worker runs before its threads start. What goes into a
snapshot is `agentledger.events.snapshot`'s, as data; this module puts it through the codec."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from agentledger.events import snapshot
from agentledger.events.fold import fold
from agentledger.events.state import RunState, Turn
from agentledger.events.types import CODEC
from agentledger.schemas.codec import pack, unpack
from agentledger.schemas.errors import InvalidEvent
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.store.port import EventStore, Snapshot
from agentledger.services.bounded_cache import BoundedCache
from agentledger.services.errors import SampleMisread

UNREADABLE = (InvalidEvent, ValueError, TypeError, KeyError)
"""What `decode` raises for a snapshot it cannot read: bytes that are not msgpack or
pages the store lacks (InvalidEvent), a version it does not know, a spec or a value
that does not validate (ValueError: SnapshotError, pydantic's ValidationError), a
record of another shape (TypeError, KeyError). The store's own failures are not."""

TURNS_PACKED = 4 * 1024  # past turns kept packed per process: four a run the cache keeps
SPECS_KEPT = 256  # validated specs of snapshots kept per process, by their bytes
SPECS_MAX_BYTES = 16 << 20  # and at most this many bytes of them

VERSION = f"codec{snapshot.VERSION}"  # the snapshot format; another is folded past, not read


def encode(state: RunState, *, pages_saved: int, with_spec: bool) -> Snapshot:
    """The snapshot of `state` (the header, the pages not saved yet, the spec if asked)."""
    head = snapshot.header(state)
    head["tail"] = _PACKED.array(snapshot.tail_of(state))  # packed apart: decoded on demand
    pages = {
        n: _PACKED.array(turns)
        for n, turns in snapshot.page_turns(state, first=pages_saved).items()
    }
    spec = pack(state.spec.model_dump(mode="json")) if with_spec else None
    return Snapshot(state.seq, state.last_event_id, VERSION, pack(head), spec, pages)


class PackedTurns:
    """Past turns packed once each. A past turn never changes and is the same object
    from one state of its run to the next, so a snapshot's tail turns (up to
    PAGE_TURNS - 1 of them, in every snapshot until their page fills) and each full
    page are msgpack arrays of turns packed before: the tail of a snapshot costs
    the same whichever turn of its page the run is at. Kept by the turn object's
    identity (the entry holds the turn, so its id is not reused while kept), the
    newest `capacity` turns and at most `max_bytes` of packed bytes."""

    def __init__(self, capacity: int = TURNS_PACKED, max_bytes: int = 8 << 20) -> None:
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._kept: OrderedDict[int, tuple[Turn, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def array(self, turns: Sequence[Turn]) -> bytes:
        """`pack([turn_record(t) for t in turns])`, the same bytes."""
        return _array_header(len(turns)) + b"".join(self._one(t) for t in turns)

    def _one(self, turn: Turn) -> bytes:
        with self._lock:
            kept = self._kept.get(id(turn))
            if kept is not None and kept[0] is turn:
                self._kept.move_to_end(id(turn))
                return kept[1]
        packed = pack(snapshot.turn_record(turn))
        with self._lock:
            replaced = self._kept.pop(id(turn), None)
            self._bytes -= len(replaced[1]) if replaced else 0
            self._kept[id(turn)] = (turn, packed)
            self._bytes += len(packed)
            while len(self._kept) > self._capacity or self._bytes > self._max_bytes:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._bytes -= len(dropped)
        return packed


def _array_header(n: int) -> bytes:
    """msgpack's header of an array of n items (fixarray, array 16, array 32)."""
    if n < 16:
        return bytes((0x90 | n,))
    return b"\xdc" + n.to_bytes(2, "big") if n < 1 << 16 else b"\xdd" + n.to_bytes(4, "big")


_PACKED = PackedTurns()


def decode(snap: Snapshot, run_id: str, store: EventStore) -> RunState:
    """The state a snapshot stands for, its past turns read (the full pages it names,
    in one call) and decoded now: nothing that decides on it reads anything."""
    return _decoded(snap, lambda n: store.snapshot_pages(run_id, n))


def _decoded(snap: Snapshot, stored_pages: Callable[[int], list[bytes]]) -> RunState:
    head = unpack(snap.state)
    if not isinstance(head, dict) or snap.spec is None:
        raise InvalidEvent("a snapshot without its header or spec", field="snapshot")
    tail = head.pop("tail", None)
    if not isinstance(tail, bytes):
        raise InvalidEvent("a snapshot header without its tail turns", field="snapshot")
    turns = unpack(tail)
    if not isinstance(turns, list):
        raise InvalidEvent("the tail turns are not a list", field="snapshot")
    full = snapshot.full_pages(head)
    pages = [unpack(blob) for blob in stored_pages(full)] if full else []
    return snapshot.restore(head, spec=spec_of(snap.spec), pages=pages, tail=turns)


def warm_up() -> None:
    """Read the sample run (`agentledger.events.sample_run`) as a run's first load reads one: its
    events through the codec, a snapshot of its state written and read back, the
    rest folded onto it, its past turns decoded. A worker does this before its
    threads start (`bootstrap.prepare_readers`), so its first real load runs code
    that has run before; nothing is written to any store. Raises SampleMisread
    when what it reads back is not the sample's fold."""
    from agentledger.events.sample_run import sample_log  # here: a CLI command never warms up

    log = [CODEC.decode(CODEC.encode(e)) for e in sample_log()]
    older = fold(log[:9])  # the second turn's reply: the first turn is past
    if older is None or len(older.history) != 1:
        raise SampleMisread("its first nine events do not leave one past turn")
    restored = _decoded(encode(older, pages_saved=0, with_spec=True), lambda n: [])
    state = fold(log[9:], restored)
    if state is None or state.history.item(0) != older.history.item(0):
        raise SampleMisread("the past turn the snapshot holds is not the one folded")
    if state != fold(log):
        raise SampleMisread("the snapshot and the events after it do not fold to the whole log")


_SPECS: BoundedCache[RunSpec] = BoundedCache(max_items=SPECS_KEPT, max_bytes=SPECS_MAX_BYTES)


def spec_of(blob: bytes) -> RunSpec:
    """The spec a snapshot holds, validated once per process for the same bytes: runs
    of one spec (a fleet of the same agent) share it, and a RunSpec is frozen. What
    comes from Redis is still validated, each distinct spec once. Kept: the specs
    used last, SPECS_KEPT of them and SPECS_MAX_BYTES of their bytes at most."""
    found = _SPECS.get(blob)
    if found is None:
        found = RunSpec.model_validate(unpack(blob))
        _SPECS.put(blob, found, len(blob))
    return found
