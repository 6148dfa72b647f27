"""Loading a run's state as snapshot + tail (`services.handlers.state_cache`), on both
store adapters: whatever was cached or snapshotted, a load is the fold of the
log as it is now."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
import redis

from events.fold import fold
from services.adapters.broker.outbox import Outbox
from services.adapters.locks.memory_locks import MemoryLocks
from services.adapters.store.memory import MemoryEventStore
from services.adapters.store.port import EventStore, Head, Snapshot, Tail
from services.adapters.store.redis_store import RedisEventStore
from services.handlers.runs import Runs
from services.handlers.state_cache import SNAPSHOT_EVERY, VERSION, StateCache
from services.keys import Keys
from tests.contracts.envelopes import batch


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> EventStore:
    if request.param == "memory":
        return MemoryEventStore()
    return RedisEventStore(request.getfixturevalue("client"), request.getfixturevalue("keys"))


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


def test_each_load_folds_only_the_events_since_the_last_one(store: EventStore) -> None:
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
    store: EventStore,
) -> None:
    writer = Spy(store)
    cache = StateCache(writer)  # type: ignore[arg-type]
    for upto in range(5, 2 * SNAPSHOT_EVERY + 20, 5):
        grow(store, "run-a", upto)
        cache.load("run-a")

    fresh = Spy(store)
    state = StateCache(fresh).load("run-a")  # type: ignore[arg-type]

    assert writer.saved == [SNAPSHOT_EVERY, 2 * SNAPSHOT_EVERY]
    assert fresh.tails[0].base == 2 * SNAPSHOT_EVERY
    assert len(fresh.tails[0].events) == state.seq - 2 * SNAPSHOT_EVERY  # type: ignore[union-attr]
    assert state == fold(store.read("run-a"))


def test_a_snapshot_that_cannot_be_read_is_passed_over_for_the_log(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    grow(store, "run-a", 30)
    at_20 = store.read("run-a")[19]
    store.save_snapshot("run-a", Snapshot(20, at_20.id, VERSION, b"not a pickle"))

    with caplog.at_level(logging.WARNING):
        state = StateCache(store).load("run-a")

    assert state == fold(store.read("run-a"))
    assert "snapshot of run 'run-a' at seq 20 not used" in caplog.text


def test_an_unknown_run_loads_as_none_and_is_not_cached(store: EventStore) -> None:
    cache = StateCache(store)

    assert cache.load("no-such-run") is None
    assert len(cache) == 0


def test_the_cache_keeps_only_the_most_recently_loaded_runs(store: EventStore) -> None:
    cache = StateCache(store, capacity=2)
    for run_id in ("run-a", "run-b", "run-c"):
        grow(store, run_id, 3)
    cache.load("run-a")
    cache.load("run-b")
    cache.load("run-a")

    cache.load("run-c")

    assert (cache.get("run-a") is not None, cache.get("run-b"), len(cache)) == (True, None, 2)


def test_many_runs_load_in_one_store_call(store: EventStore) -> None:
    spy = Spy(store)
    cache = StateCache(spy)  # type: ignore[arg-type]
    for run_id in ("run-a", "run-b"):
        grow(store, run_id, 4)

    states = cache.load_many(["run-a", "no-such-run", "run-b"])

    assert len(spy.tails) == 3
    assert [s.run_id if s else None for s in states] == ["run-a", None, "run-b"]


def test_a_step_on_a_held_state_that_is_stale_conflicts_and_is_decided_again(
    store: EventStore,
) -> None:
    grow(store, "run-a", 3)
    stale = fold(store.read("run-a"))
    grow(store, "run-a", 5)
    seen: list[int] = []

    def decide(s: Any) -> list[Any]:
        seen.append(s.seq)
        return [batch("run-a", s.seq + 1, 1)[0].data]

    runs = Runs(store, _Clock(), Outbox(Keys("t", 8)), MemoryLocks(_Clock(), lease_s=5), lambda m: None)
    step = runs.step("run-a", decide, source="test", held=stale)

    assert seen == [3, 5]
    assert step.state == fold(store.read("run-a")) and step.state.seq == 6


class _Clock:
    def now(self) -> float:
        return 1_700_000_000.0


def test_a_log_deleted_and_made_again_is_folded_afresh(client: redis.Redis, keys: Keys) -> None:
    store = RedisEventStore(client, keys)
    cache = StateCache(store)
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    grow(store, run_id, SNAPSHOT_EVERY + 10)
    cache.load(run_id)  # cached at 60, snapshot at 60

    client.delete(keys.run(run_id))
    grow(store, run_id, SNAPSHOT_EVERY + 15)  # same run id, other events, a longer log
    again = cache.load(run_id)
    from_a_fresh_process = StateCache(store).load(run_id)

    assert again == from_a_fresh_process == fold(store.read(run_id))
