"""Loading a run's state as snapshot + tail (`agentledger.services.handlers.state_cache`) over
any store adapter: whatever was cached or snapshotted, a load is the fold of the
log as it is now. A tier subclasses `StateCacheSuite` with a `store` fixture (a
new, empty adapter): the in-memory one in the unit tier, Redis in the
integration tier."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from agentledger.events.fold import fold
from agentledger.schemas.codec import pack, unpack
from agentledger.services.adapters.broker.outbox import Outbox
from agentledger.services.adapters.locks.memory_locks import MemoryLocks
from agentledger.services.adapters.store.port import EventStore, Head, Snapshot, Tail
from agentledger.services.handlers import state_bytes
from agentledger.services.handlers.engine import Decided, Engine
from agentledger.services.handlers.runs import Runs
from agentledger.services.handlers.state_cache import SNAPSHOT_EVERY, VERSION, StateCache, encode
from agentledger.services.keys import Keys
from tests.contracts.clock import ManualClock
from tests.contracts.envelopes import T0, batch


class Spy:
    """Counts the store calls a cache makes and what their tails held."""

    def __init__(self, inner: EventStore):
        self.inner = inner
        self.tails: list[Tail] = []
        self.saved: list[int] = []

    def read_tails(self, heads: list[Head], *, snapshot_version: str) -> list[Tail]:
        tails = self.inner.read_tails(heads, snapshot_version=snapshot_version)
        self.tails += tails
        return tails

    def save_snapshot(self, run_id: str, snapshot: Snapshot) -> None:
        self.saved.append(snapshot.seq)
        self.inner.save_snapshot(run_id, snapshot)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def grow(store: EventStore, run_id: str, upto: int) -> None:
    have = len(store.read(run_id))
    store.append(run_id, batch(run_id, have + 1, upto - have), expected_seq=have, live=True)


class StateCacheSuite:
    def test_each_load_folds_only_the_events_since_the_last_one(self, store: EventStore) -> None:
        spy = Spy(store)
        cache = StateCache(spy)  # type: ignore[arg-type]
        grow(store, "run-a", 10)

        first = cache.load("run-a")
        grow(store, "run-a", 13)
        second = cache.load("run-a")
        third = cache.load("run-a")

        assert [len(t.events) for t in spy.tails] == [10, 3, 0]
        assert first == fold(store.read("run-a")[:10])
        assert second == third == fold(store.read("run-a"))

    def test_a_snapshot_is_saved_every_k_events_and_a_fresh_process_starts_from_it(
        self,
        store: EventStore,
    ) -> None:
        writer = Spy(store)
        cache = StateCache(writer, snapshot_every=10)  # type: ignore[arg-type]
        for upto in range(5, 40, 5):
            grow(store, "run-a", upto)
            cache.load("run-a")

        fresh = Spy(store)
        state = StateCache(fresh).load("run-a")  # type: ignore[arg-type]

        assert writer.saved == [10, 20, 30]
        assert fresh.tails[0].base == 30
        assert len(fresh.tails[0].events) == 5
        assert state == fold(store.read("run-a"))

    def test_a_writer_appends_the_snapshot_that_is_due_with_its_events(
        self, store: EventStore
    ) -> None:
        writer = Spy(store)
        cache = StateCache(writer, snapshot_every=10)  # type: ignore[arg-type]
        grow(store, "run-a", 5)
        state = cache.load("run-a")
        due = []
        for seq in range(5, 23, 3):  # as Runs._save: snapshot_due, append with it, appended
            events = batch("run-a", seq + 1, 3)
            after = fold(events, state)
            assert after is not None
            snap = cache.snapshot_due("run-a", after)
            writer.append("run-a", events, expected_seq=seq, live=True, snapshot=snap)
            cache.appended("run-a", after, events[-1].id, snap)
            due.append(snap.seq if snap else None)
            state = after

        fresh = Spy(store)
        loaded = StateCache(fresh).load("run-a")  # type: ignore[arg-type]

        assert due == [None, 11, None, None, None, 23]
        assert writer.saved == [], "no snapshot of its own: each went with an append"
        assert (fresh.tails[0].base, fresh.tails[0].events) == (23, [])
        assert loaded == state == fold(store.read("run-a"))

    def test_a_snapshot_that_cannot_be_read_is_passed_over_for_the_log(
        self, store: EventStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        grow(store, "run-a", 30)
        at_20 = store.read("run-a")[19]
        store.save_snapshot("run-a", Snapshot(20, at_20.id, VERSION, b"not a pickle"))

        with caplog.at_level(logging.WARNING):
            state = StateCache(store).load("run-a")

        assert state == fold(store.read("run-a"))
        assert "snapshot of run 'run-a' at seq 20 not used" in caplog.text

    @pytest.mark.parametrize(
        ("broken", "header"),
        [
            ("a header without a field", lambda h: {k: v for k, v in h.items() if k != "status"}),
            ("a field of another shape", lambda h: {**h, "checks": 5}),
            ("a status no run has", lambda h: {**h, "status": "sleeping"}),
            ("a newer version", lambda h: {**h, "v": 99}),
            ("another run's state", lambda h: {**h, "run_id": "run-b"}),
        ],
    )
    def test_a_snapshot_whose_header_does_not_read_back_is_passed_over_for_the_log(
        self,
        store: EventStore,
        caplog: pytest.LogCaptureFixture,
        broken: str,
        header: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        grow(store, "run-a", 30)
        at_20 = fold(store.read("run-a")[:20])
        assert at_20 is not None
        good = encode(at_20, pages_saved=0, with_spec=True)
        bad = replace(good, state=pack(header(unpack(good.state))))
        store.save_snapshot("run-a", bad)

        with caplog.at_level(logging.WARNING):
            state = StateCache(store).load("run-a")

        assert state == fold(store.read("run-a")), broken
        assert "snapshot of run 'run-a' at seq 20 not used" in caplog.text, broken

    def test_a_snapshot_of_another_format_is_folded_past_not_read(
        self, store: EventStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        grow(store, "run-a", 30)
        at_20 = store.read("run-a")[19]
        store.save_snapshot("run-a", Snapshot(20, at_20.id, "codec1", b"an older header"))

        fresh = Spy(store)
        with caplog.at_level(logging.WARNING):
            state = StateCache(fresh).load("run-a")  # type: ignore[arg-type]

        assert fresh.tails[0].snapshot is None and fresh.tails[0].base == 0
        assert state == fold(store.read("run-a"))
        assert "not used" not in caplog.text, "never read, so never refused"

    def test_runs_of_one_spec_loaded_from_snapshots_share_its_validated_spec(
        self, store: EventStore
    ) -> None:
        writer = StateCache(store)
        for run_id in ("run-a", "run-b"):
            grow(store, run_id, SNAPSHOT_EVERY + 3)
            writer.load(run_id)

        fresh = Spy(store)
        cache = StateCache(fresh)  # type: ignore[arg-type]
        a, b = cache.load("run-a"), cache.load("run-b")

        assert [t.base for t in fresh.tails] == [SNAPSHOT_EVERY + 3] * 2, "both from snapshots"
        assert a is not None and b is not None and a.spec is b.spec
        assert a == fold(store.read("run-a")) and b == fold(store.read("run-b"))

    def test_an_unknown_run_loads_as_none_and_is_not_cached(self, store: EventStore) -> None:
        cache = StateCache(store)

        assert cache.load("no-such-run") is None
        assert len(cache) == 0

    def test_the_cache_keeps_only_the_most_recently_loaded_runs(self, store: EventStore) -> None:
        cache = StateCache(store, capacity=2)
        for run_id in ("run-a", "run-b", "run-c"):
            grow(store, run_id, 3)
        cache.load("run-a")
        cache.load("run-b")
        cache.load("run-a")

        cache.load("run-c")

        assert (cache.get("run-a") is not None, cache.get("run-b"), len(cache)) == (True, None, 2)

    def test_a_held_state_just_behind_a_newer_snapshot_is_folded_on_not_read_again(
        self, store: EventStore
    ) -> None:
        """Another thread's append left a snapshot its `appended` has not handed over
        yet: decoding it would make a second copy of every past turn."""
        grow(store, "run-a", 10)
        cache = StateCache(store)
        held = cache.load("run-a")
        grow(store, "run-a", 14)
        newer = fold(store.read("run-a"))
        assert held is not None and newer is not None
        store.save_snapshot("run-a", encode(newer, pages_saved=0, with_spec=True))

        state = cache.load("run-a")

        assert state == newer
        assert state is not None and state.spec is held.spec, "folded on from the held state"
        assert StateCache(store).load("run-a").spec is not held.spec  # type: ignore[union-attr]

    def test_the_cache_is_bounded_by_the_bytes_of_its_states_least_recently_used_first(
        self, store: EventStore
    ) -> None:
        let_go: list[str] = []
        for run_id in ("run-a", "run-b", "run-c"):
            grow(store, run_id, 3)
        one = StateCache(store).load("run-a")
        assert one is not None
        size = state_bytes.grown_by(store.read("run-a"))
        cache = StateCache(store, max_bytes=2 * size, let_go=let_go.append)

        cache.load("run-a"), cache.load("run-b"), cache.load("run-a"), cache.load("run-c")

        assert (cache.get("run-a") is not None, cache.get("run-b"), len(cache)) == (True, None, 2)
        assert let_go == ["run-b"] and cache.bytes == 2 * size

    def test_the_run_used_last_is_kept_whatever_it_costs(self, store: EventStore) -> None:
        grow(store, "run-a", 5)
        cache = StateCache(store, max_bytes=1, let_go=lambda run_id: None)

        assert cache.load("run-a") is not None
        assert len(cache) == 1 and cache.bytes > cache.max_bytes

    def test_many_runs_load_in_one_store_call(self, store: EventStore) -> None:
        spy = Spy(store)
        cache = StateCache(spy)  # type: ignore[arg-type]
        for run_id in ("run-a", "run-b"):
            grow(store, run_id, 4)

        states = cache.load_many(["run-a", "no-such-run", "run-b"])

        assert len(spy.tails) == 3
        assert [s.run_id if s else None for s in states] == ["run-a", None, "run-b"]

    def test_a_step_on_a_held_state_that_is_stale_conflicts_and_is_decided_again(
        self,
        store: EventStore,
    ) -> None:
        grow(store, "run-a", 3)
        stale = fold(store.read("run-a"))
        grow(store, "run-a", 5)
        seen: list[int] = []

        def decide(s: Any) -> list[Any]:
            seen.append(s.seq)
            return [batch("run-a", s.seq + 1, 1)[0].data]

        clock = ManualClock(T0)
        runs = Runs(
            store, clock, Outbox(Keys("t", 8)), MemoryLocks(clock, lease_s=5), lambda m: None
        )
        step = Engine(runs).take("run-a", Decided("test", decide), held=stale)

        assert seen == [3, 5]
        assert step.state == fold(store.read("run-a")) and step.state.seq == 6
