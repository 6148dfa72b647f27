"""The contract every lock table and every idempotency ledger keeps, run against
the in-memory adapters (the unit tests' stand-ins) and the Redis ones alike:
what one passes, the other passes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from events.lock_step import LockAsk
from events.locks import Mode
from services.adapters.ledger.memory_ledger import MemoryLedger
from services.adapters.ledger.port import Ledger
from services.adapters.ledger.redis_ledger import RedisLedger
from services.adapters.locks.memory_locks import MemoryLocks
from services.adapters.locks.port import Locks
from services.adapters.locks.redis_locks import RedisLocks
from services.adapters.store.port import Outgoing
from services.clock import SystemClock
from services.keys import Keys

LEASE_S = 0.3
R, W = Mode.READ, Mode.WRITE


def ask(run: str, call: str, **keys: Mode) -> LockAsk:
    return LockAsk(run, call, f"{run}/{call}/1.0", {k.replace("_", ":"): m for k, m in keys.items()})


@pytest.fixture(params=["memory", "redis"])
def locks(request: pytest.FixtureRequest) -> Locks:
    if request.param == "memory":
        return MemoryLocks(SystemClock(), lease_s=LEASE_S)
    client: redis.Redis = request.getfixturevalue("client")
    return RedisLocks(client, Keys(request.getfixturevalue("prefix"), 1).locks(0), lease_s=LEASE_S)


def test_a_free_request_is_granted_at_once_with_a_token_per_key(locks: Locks) -> None:
    [g] = locks.enqueue([ask("r1", "c1", stock_A1=W, stock_B2=R)], [None]).grants
    assert set(g.grant.tokens) == {"stock:A1", "stock:B2"}
    assert (g.holder.run_id, g.holder.call_id) == ("r1", "c1")
    assert g.grant.lease_until > time.time()


def test_reads_share_and_a_write_waits_then_is_told_when_let_through(locks: Locks) -> None:
    notice = Outgoing("somewhere", b"wake up")
    assert locks.enqueue([ask("r1", "a", k=R), ask("r2", "b", k=R)], [None, None]).grants
    assert locks.enqueue([ask("r3", "w", k=W)], [notice]).grants == []
    assert locks.release(["r1/a/1.0"]).grants == []  # the other read still holds it
    reply = locks.release(["r2/b/1.0"])
    assert [g.holder.request_id for g in reply.grants] == ["r3/w/1.0"]
    assert reply.notices() == [notice]


def test_a_request_for_two_keys_waits_whole_while_one_is_held(locks: Locks) -> None:
    locks.enqueue([ask("r1", "a", x=W)], [None])
    assert locks.enqueue([ask("r2", "b", x=W, y=W)], [None]).grants == []
    assert [g.holder.call_id for g in locks.enqueue([ask("r3", "c", y=W)], [None]).grants] == []
    assert [g.holder.call_id for g in locks.release(["r1/a/1.0"]).grants] == ["b"]


def test_a_request_asked_again_learns_the_grant_it_holds(locks: Locks) -> None:
    first = locks.enqueue([ask("r1", "a", x=W)], [None]).grants
    again = locks.enqueue([ask("r1", "a", x=W)], [None]).grants
    assert [g.grant.tokens for g in again] == [g.grant.tokens for g in first]


def test_tokens_grow_with_every_grant_of_a_key(locks: Locks) -> None:
    tokens = []
    for i in range(3):
        [g] = locks.enqueue([ask("r", f"c{i}", x=W)], [None]).grants
        tokens.append(g.grant.tokens["x"])
        locks.release([g.holder.request_id])
    assert tokens == sorted(set(tokens))


def test_a_holder_that_stops_renewing_loses_its_lock_to_the_next(locks: Locks) -> None:
    locks.enqueue([ask("r1", "a", x=W)], [None])
    locks.enqueue([ask("r2", "b", x=W)], [None])
    for _ in range(3):  # renewing keeps it past its first lease
        time.sleep(LEASE_S / 3)
        assert locks.renew("r1/a/1.0")
        assert locks.expire().expired == []
    time.sleep(LEASE_S + 0.05)
    reply = locks.expire()
    assert [(h.run_id, h.call_id) for h in reply.expired] == [("r1", "a")]
    assert [g.holder.call_id for g in reply.grants] == ["b"]
    assert not locks.renew("r1/a/1.0"), "a lost lease is not renewed"


def test_a_release_of_an_unknown_request_changes_nothing(locks: Locks) -> None:
    locks.enqueue([ask("r1", "a", x=W)], [None])
    assert locks.release(["nobody/x/1.0"]).grants == []
    assert locks.enqueue([ask("r2", "b", x=W)], [None]).grants == []


@pytest.fixture(params=["memory", "redis"])
def ledger(request: pytest.FixtureRequest) -> Callable[[float], Ledger]:
    def make(keep_s: float) -> Ledger:
        if request.param == "memory":
            return MemoryLedger(SystemClock(), keep_s=keep_s)
        client: redis.Redis = request.getfixturevalue("client")
        return RedisLedger(client, Keys(request.getfixturevalue("prefix"), 1), keep_s=keep_s)

    return make


def test_a_done_operation_is_replayed_and_another_request_under_its_key_refused(
    ledger: Callable[[float], Ledger],
) -> None:
    led = ledger(60)
    assert led.begin("op", "req", "r/c1/1", now=1.0).action == "run"
    assert led.begin("op", "req", "r/c2/1", now=2.0).action == "in_progress"
    led.finish("op", "req", "r/c1/1", {"ok": 1}, now=3.0)
    replay = led.begin("op", "req", "r/c3/1", now=4.0)
    assert (replay.action, replay.owner, replay.result) == ("replay", "r/c1/1", {"ok": 1})
    assert led.begin("op", "other", "r/c4/1", now=5.0).action == "conflict"


def test_an_abandoned_pending_operation_may_run_again_and_a_done_one_stays(
    ledger: Callable[[float], Ledger],
) -> None:
    led = ledger(60)
    led.begin("a", "req", "r/c1/1", now=1.0)
    led.abandon("a")
    assert led.begin("a", "req", "r/c2/1", now=2.0).action == "run"
    led.finish("a", "req", "r/c2/1", 1, now=3.0)
    led.abandon("a")
    assert led.begin("a", "req", "r/c3/1", now=4.0).action == "replay"


def test_a_done_operation_is_forgotten_after_its_keep_time(ledger: Callable[[float], Ledger]) -> None:
    led = ledger(1)
    led.begin("k", "req", "r/c1/1", now=1.0)
    led.finish("k", "req", "r/c1/1", 1, now=2.0)
    time.sleep(1.2)
    assert led.begin("k", "req", "r/c2/1", now=3.0).action == "run"
