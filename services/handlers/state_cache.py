"""Run states as snapshot + tail, behind `agentledger.services.handlers.runs.Runs.load`.

A run's state is the fold of its log and nothing else; this module only says
where folding may start. Each process keeps the states it folded last (an
LRU bounded by count and by an estimate of their bytes, `state_bytes`; the run
used last is kept whatever it costs; a run let go is let go by the context
view's caches too), each with the seq and id of the last event folded, and every
SNAPSHOT_EVERY events a snapshot of the state goes into the store: data
through the codec (`agentledger.events.snapshot`, encoded and decoded by `snapshots`), a small header plus the pages of past
turns that filled up since the last one, so writing one costs the same at
turn 2000 as at turn 20, and a new process loads the header, the few events
after it and the full pages of past turns it names (read with the snapshot, one
call: a state handed out holds its whole past, so no decision on it reads
anything). A writer's snapshot goes in its append (`snapshot_due`): no round
trip of its own, and it lands only with the events it folds. A load asks
the store, in one call, for the events after the cached state *and* whether
the log still holds the event the cached state ends with; the store answers
with a newer snapshot when it has one that still matches the log, and with the
whole log when neither matches (a stream deleted and made again), which is
then folded from nothing. Loads of many runs (`agentledger list`, the web
view, the metrics) share one call. A writer hands over the state it folded
from the events it appended (`expecting`, `appended`), so its own steps are
not read back. A state this process holds is brought up to date by folding the
events after it, even when another thread's append has just left a newer
snapshot: decoding that snapshot would make a second copy of every past turn
(and of the context view's rendering of them)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from agentledger.events import context_view
from agentledger.events.fold import fold
from agentledger.events.snapshot import PAGE_TURNS
from agentledger.events.state import RunState
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.store.port import EventStore, Head, Snapshot, Tail
from agentledger.services.handlers import state_bytes
from agentledger.services.handlers.snapshots import UNREADABLE, VERSION, decode, encode
from agentledger.services.handlers.snapshots import PackedTurns as PackedTurns  # re-exported: these
from agentledger.services.handlers.snapshots import spec_of as spec_of  # three were this module's
from agentledger.services.handlers.snapshots import (
    warm_up as warm_up,  # before `snapshots` was split
)

SNAPSHOT_EVERY = 12  # events between two snapshots of a run (about two tool calls)
CACHED_RUNS = 1024  # folded states kept per process (and per store), at most
MAX_BYTES = 64 << 20  # their estimated bytes, at most (AGENTLEDGER_STATE_CACHE_MAX_BYTES)
CATCH_UP = 8 * SNAPSHOT_EVERY  # events a held state is folded on by rather than a snapshot
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Folded:
    state: RunState
    event_id: str  # the id of the event at state.seq
    snapshot_seq: int  # the newest snapshot the store holds, as last seen
    pages_saved: int = 0  # full pages of past turns this process knows are stored
    spec_saved: bool = False
    size: int = 0  # estimated bytes (`state_bytes`)


class StateCache:
    """The folded states of one store's runs, in this process."""

    def __init__(
        self,
        store: EventStore,
        *,
        capacity: int = CACHED_RUNS,
        snapshot_every: int = SNAPSHOT_EVERY,
        max_bytes: int = MAX_BYTES,
        let_go: Callable[[str], None] = context_view.forget,
    ):
        self._store = store
        self._capacity = capacity
        self._every = snapshot_every
        self.max_bytes = max_bytes
        self._let_go = let_go  # told of each run dropped: its other caches drop it too
        self._bytes = 0
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
            dropped = self._entries.pop(run_id, None)
            self._bytes -= dropped.size if dropped is not None else 0
        if dropped is not None:
            self._let_go(run_id)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The estimated bytes of the states kept."""
        return self._bytes

    def _bring_up(self, run_id: str, held: Folded | None, tail: Tail) -> RunState | None:
        base, base_id, events, restored = self._base(run_id, held, tail)
        state = fold(events, base)
        if state is None:
            self.forget(run_id)
            return None
        if restored and base is not None:  # what the snapshot holds is stored
            size = state_bytes.guessed(base)
            pages = len(base.history) // PAGE_TURNS
            self._put(run_id, Folded(base, base_id, tail.snapshot_seq, pages, True, size))
            base_size = size
        else:
            base_size = held.size if held is not None and base is held.state else 0
        size = base_size + state_bytes.grown_by(events)
        self._keep(run_id, state, events[-1].id if events else base_id, tail.snapshot_seq, size)
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

    def snapshot_due(self, run_id: str, state: RunState) -> Snapshot | None:
        """The snapshot a writer appends with the events that lead to `state` (in the
        same call: it lands only with them), when one is due; else None."""
        snapshot_seq, pages_saved, spec_saved = self._marks(run_id, state)
        if state.seq - snapshot_seq < self._every:
            return None
        return encode(state, pages_saved=pages_saved, with_spec=not spec_saved)

    def appended(
        self,
        run_id: str,
        state: RunState,
        event_id: str,
        snapshot: Snapshot | None = None,
        batch: Sequence[Envelope[Any]] = (),
    ) -> None:
        """A writer appended `batch`, the events that end with `event_id` (and
        `snapshot`, from `snapshot_due`, with them) and folded them into `state` (from
        the events as stored): keep that instead of reading them back."""
        marks = self._marks(run_id, state)
        if snapshot is not None:
            marks = (state.seq, len(state.history) // PAGE_TURNS, True)
        held = self.get(run_id)
        if held is not None and held.state.created_at == state.created_at:
            size = held.size + state_bytes.grown_by(batch)
        elif batch and batch[0].seq == 1:
            size = state_bytes.grown_by(batch)
        else:
            size = state_bytes.guessed(state)
        self._put(run_id, Folded(state, event_id, *marks, size))

    def _keep(
        self, run_id: str, state: RunState, event_id: str, snapshot_seq: int, size: int
    ) -> None:
        """A reader folded `state`: kept, and a snapshot of it saved when one is due."""
        _, pages_saved, spec_saved = self._marks(run_id, state)
        if state.seq - snapshot_seq >= self._every:
            snap = encode(state, pages_saved=pages_saved, with_spec=not spec_saved)
            self._store.save_snapshot(run_id, snap)
            snapshot_seq, spec_saved = state.seq, True
            pages_saved = len(state.history) // PAGE_TURNS
        self._put(run_id, Folded(state, event_id, snapshot_seq, pages_saved, spec_saved, size))

    def _marks(self, run_id: str, state: RunState) -> tuple[int, int, bool]:
        """What this process knows is stored of `state`'s run: the newest snapshot's
        seq, the full pages of past turns and whether the spec is (nothing of a run
        made again under the same id)."""
        held = self.get(run_id)
        if held is None or held.state.created_at != state.created_at:
            return 0, 0, False
        return held.snapshot_seq, held.pages_saved, held.spec_saved

    def _base(
        self, run_id: str, held: Folded | None, tail: Tail
    ) -> tuple[RunState | None, str, list[Envelope[Any]], bool]:
        """The state `tail.events` fold onto, the id of its last event, the events, and
        whether that state was restored from a snapshot."""
        if tail.snapshot is not None and held is not None:
            caught_up = self._catch_up(run_id, held, tail)
            if caught_up is not None:
                return held.state, held.event_id, caught_up, False
        if tail.snapshot is not None:
            try:
                state = decode(tail.snapshot, run_id, self._store)
                if state.seq != tail.base or state.run_id != run_id:
                    raise ValueError(f"holds {state.run_id!r} at seq {state.seq}")
                return state, tail.snapshot.event_id, tail.events, True
            except UNREADABLE as exc:  # a snapshot is a cache: fold the log instead
                log.warning("snapshot of run %r at seq %d not used: %r", run_id, tail.base, exc)
                return None, "", self._store.read(run_id), False
        if tail.base == 0:
            return None, "", tail.events, False
        assert held is not None and held.state.seq == tail.base
        return held.state, held.event_id, tail.events, False

    def _catch_up(self, run_id: str, held: Folded, tail: Tail) -> list[Envelope[Any]] | None:
        """The events after a held state a little behind a newer snapshot (another
        thread's append has just left one), when the log still holds its last event."""
        behind = tail.base - held.state.seq
        if held.state.seq < 1 or not 0 < behind <= CATCH_UP:
            return None
        events = self._store.read(run_id, after_seq=held.state.seq - 1)
        if not events or events[0].id != held.event_id or events[0].seq != held.state.seq:
            return None
        return events[1:]

    def _put(self, run_id: str, folded: Folded) -> None:
        dropped: list[str] = []
        with self._lock:
            kept = self._entries.get(run_id)
            if kept is None or kept.state.seq <= folded.state.seq:  # a slower load never wins
                self._entries[run_id] = folded
                self._bytes += folded.size - (kept.size if kept is not None else 0)
            self._entries.move_to_end(run_id)
            while len(self._entries) > 1 and (
                len(self._entries) > self._capacity or self._bytes > self.max_bytes
            ):  # least recently used first; the run used last stays, whatever it costs
                gone, old = self._entries.popitem(last=False)
                self._bytes -= old.size
                dropped.append(gone)
        for gone in dropped:
            self._let_go(gone)


_CACHES: WeakKeyDictionary[Any, StateCache] = WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_for(store: EventStore, *, max_bytes: int | None = None) -> StateCache:
    """The process's cache of `store`'s runs (one per store object); `max_bytes`, when
    given, its budget (the worker's setting)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = StateCache(store, max_bytes=max_bytes or MAX_BYTES)
        elif max_bytes is not None:
            cache.max_bytes = max_bytes
        return cache
