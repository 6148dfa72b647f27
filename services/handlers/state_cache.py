"""Run states as snapshot + tail, behind `services.handlers.runs.Runs.load`.

A run's state is the fold of its log and nothing else; this module only says
where folding may start. Each process keeps the states it folded last (a
bounded LRU, each with the seq and id of the last event folded), and every
SNAPSHOT_EVERY events (or a SNAPSHOT_SHARE-th of the log, if more) a snapshot
of the state goes into the store. A load asks the store, in one call, for the
events after the cached state *and* whether the log still holds the event the
cached state ends with; the store answers with a newer snapshot when it has
one that still matches the log, and with the whole log when neither matches
(a stream deleted and made again), which is then folded from nothing. Loads
of many runs (the reactor's) share one call. A writer hands over the state it
folded from the events it appended (`expecting`, `appended`), so its own steps
are not read back."""

from __future__ import annotations

import hashlib
import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import events
import schemas
from events.fold import fold
from events.state import RunState
from schemas.envelope import Envelope
from services.adapters.store.port import EventStore, Head, Snapshot, Tail

SNAPSHOT_EVERY = 50  # events between two snapshots of a run…
SNAPSHOT_SHARE = 16  # …or a 16th of its log, if more: a snapshot costs the state's size
CACHED_RUNS = 1024  # folded states kept per process (and per store)
log = logging.getLogger(__name__)


def _code_version() -> str:
    """Snapshots are pickles of the fold's own classes (see `encode`), so only the
    code that wrote one may read it: any change to events/ or schemas/ makes
    the snapshots of the old code invisible (they are folded past, not read)."""
    digest = hashlib.sha256()
    for package in (events, schemas):
        for path in sorted(Path(package.__file__).parent.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"pickle{pickle.HIGHEST_PROTOCOL}-{digest.hexdigest()[:16]}"


VERSION = _code_version()


# Why pickle: a snapshot is an internal cache of our own frozen dataclasses,
# written and read only by agentledger processes of the same code version, in
# the Redis that holds the authoritative log next to it. Whoever can write the
# snapshot key can rewrite the log itself, so unpickling trusts no one new.
# Pickle restores the whole state (history, pydantic content blocks) in one C
# call, with no codec to keep in step with every state class; and a snapshot
# is never believed on its own: the store hands it out only while the log
# still holds the event it was folded up to.
def encode(state: RunState) -> bytes:
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def decode(blob: bytes) -> RunState:
    state = pickle.loads(blob)
    if not isinstance(state, RunState):
        raise TypeError(f"a snapshot holds a {type(state).__name__}")
    return state


@dataclass(frozen=True, slots=True)
class Folded:
    state: RunState
    event_id: str  # the id of the event at state.seq
    snapshot_seq: int  # the newest snapshot the store holds, as last seen


class StateCache:
    """The folded states of one store's runs, in this process."""

    def __init__(
        self,
        store: EventStore,
        *,
        capacity: int = CACHED_RUNS,
        snapshot_every: int = SNAPSHOT_EVERY,
    ):
        self._store = store
        self._capacity = capacity
        self._every = snapshot_every
        self._entries: OrderedDict[str, Folded] = OrderedDict()
        self._expected: dict[str, RunState] = {}  # event id -> state, while appends are in flight
        self._inflight: dict[str, RunState] = {}  # run id -> the state an append under way leads to
        self._lock = threading.Lock()

    def load(self, run_id: str) -> RunState | None:
        return self.load_many([run_id])[0]

    def load_many(
        self, run_ids: Sequence[str], *, ends: Mapping[str, tuple[int, str]] | None = None
    ) -> list[RunState | None]:
        """`ends` may say where a run's log ends (seq, event id), as its shard feed
        said; a cached state that ends there is the log's, and is not read again."""
        found: dict[str, RunState | None] = {}
        for run_id, (seq, event_id) in (ends or {}).items():
            held = self.get(run_id)
            if held is not None and (held.state.seq, held.event_id) == (seq, event_id):
                found[run_id] = held.state
            elif (expected := self._expected.get(event_id)) is not None:
                # our own append, seen in the feed before its reply reached us: it landed
                if expected.run_id == run_id and expected.seq == seq:
                    found[run_id] = expected
        missing = [run_id for run_id in dict.fromkeys(run_ids) if run_id not in found]
        if missing:
            held_now = [self.get(run_id) for run_id in missing]
            heads = [
                Head(run_id, f.state.seq, f.event_id) if f else Head(run_id)
                for run_id, f in zip(missing, held_now, strict=True)
            ]
            tails = self._store.read_tails(heads, snapshot_version=VERSION)
            for run_id, f, tail in zip(missing, held_now, tails, strict=True):
                found[run_id] = self._bring_up(run_id, f, tail)
        return [found[run_id] for run_id in run_ids]

    def get(self, run_id: str) -> Folded | None:
        with self._lock:
            found = self._entries.get(run_id)
            if found is not None:
                self._entries.move_to_end(run_id)
            return found

    def latest(self, run_id: str) -> RunState | None:
        """The newest state this process has of the run without reading the log: one an
        append under way leads to (a message that append queued woke us: it landed),
        else the last one kept. None when it holds none."""
        inflight = self._inflight.get(run_id)
        held = self.get(run_id)
        if inflight is not None and (held is None or inflight.seq > held.state.seq):
            return inflight
        return held.state if held is not None else None

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._entries.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._entries)

    def _bring_up(self, run_id: str, held: Folded | None, tail: Tail) -> RunState | None:
        base, base_id, events = self._base(run_id, held, tail)
        state = fold(events, base)
        if state is None:
            self.forget(run_id)
            return None
        self._keep(run_id, state, events[-1].id if events else base_id, tail.snapshot_seq)
        return state

    @contextmanager
    def expecting(self, run_id: str, state: RunState, event_id: str) -> Iterator[None]:
        """While an append of the events that end with `event_id` is under way: a
        feed entry naming that event proves the append landed, and `state` is then
        the run's (`load_many` with `ends`)."""
        self._expected[event_id] = state
        self._inflight[run_id] = state
        try:
            yield
        finally:
            self._expected.pop(event_id, None)
            if self._inflight.get(run_id) is state:
                del self._inflight[run_id]

    def appended(self, run_id: str, state: RunState, event_id: str) -> None:
        """A writer appended the events that end with `event_id` and folded them into
        `state` (from the events as stored): keep that instead of reading them back."""
        held = self.get(run_id)
        self._keep(run_id, state, event_id, held.snapshot_seq if held else 0)

    def _keep(self, run_id: str, state: RunState, event_id: str, snapshot_seq: int) -> None:
        # the state holds every turn, so writing a snapshot grows with the run; spacing them
        # by a share of the log keeps that cost per event flat, and the tail a new process
        # folds after the snapshot a share of the log
        if state.seq - snapshot_seq >= max(self._every, state.seq // SNAPSHOT_SHARE):
            self._store.save_snapshot(run_id, Snapshot(state.seq, event_id, VERSION, encode(state)))
            snapshot_seq = state.seq
        self._put(run_id, Folded(state, event_id, snapshot_seq))

    def _base(
        self, run_id: str, held: Folded | None, tail: Tail
    ) -> tuple[RunState | None, str, list[Envelope[Any]]]:
        """The state `tail.events` fold onto, the id of its last event, and the events."""
        if tail.snapshot is not None:
            try:
                state = decode(tail.snapshot.state)
                if state.seq != tail.base or state.run_id != run_id:
                    raise ValueError(f"holds {state.run_id!r} at seq {state.seq}")
                return state, tail.snapshot.event_id, tail.events
            except Exception as exc:  # any unreadable cache entry: fold the log instead
                log.warning("snapshot of run %r at seq %d not used: %r", run_id, tail.base, exc)
                return None, "", self._store.read(run_id)
        if tail.base == 0:
            return None, "", tail.events
        assert held is not None and held.state.seq == tail.base
        return held.state, held.event_id, tail.events

    def _put(self, run_id: str, folded: Folded) -> None:
        with self._lock:
            kept = self._entries.get(run_id)
            if kept is None or kept.state.seq <= folded.state.seq:  # a slower load never wins
                self._entries[run_id] = folded
            self._entries.move_to_end(run_id)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)


_CACHES: WeakKeyDictionary[Any, StateCache] = WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_for(store: EventStore) -> StateCache:
    """The process's cache of `store`'s runs (one per store object)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = StateCache(store)
        return cache
