"""The contract every lock table and every idempotency ledger keeps, written once
and run against the in-memory adapters (in the unit tier) and the Redis ones
(in the integration tier): what one passes, the other passes.

A tier subclasses `LocksContract` with the fixtures `locks` (a new, empty table
with a lease of LEASE_S, in `partitions` partitions: each tier runs the suite on
1 and on several), `now` (the table's own time) and `let_time_pass`
(seconds go by on the table's clock: a manual clock moves, Redis's `TIME` is
waited for); and `LedgerContract` with `ledger` (a new ledger keeping done
operations the given seconds) and `let_time_pass`."""

from __future__ import annotations

import time
from collections.abc import Callable

from agentledger.events.lock_partitions import partition_of
from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.services.adapters.ledger.port import Ledger
from agentledger.services.adapters.locks.port import Locks
from agentledger.services.adapters.store.port import Outgoing

LEASE_S = 0.3
R, W = Mode.READ, Mode.WRITE
Wait = Callable[[float], None]


def ask(run: str, call: str, **keys: Mode) -> LockAsk:
    return LockAsk(
        run, call, f"{run}/{call}/1.0", {k.replace("_", ":"): m for k, m in keys.items()}
    )


def spread(n: int, count: int) -> list[str]:
    """`count` resources in distinct partitions (as many as there are), lowest first."""
    by: dict[int, str] = {}
    for i in range(1000):
        by.setdefault(partition_of(f"file:/w/{i}", n), f"file:/w/{i}")
    return [by[p] for p in sorted(by)][:count] + [f"file:/w/x{i}" for i in range(count - len(by))]


def alike(n: int, count: int) -> list[str]:
    """`count` resources in one partition."""
    return [k for i in range(10_000) if partition_of(k := f"file:/w/{i}", n) == 0][:count]


def asking(run: str, call: str, keys: dict[str, Mode]) -> LockAsk:
    return LockAsk(run, call, f"{run}/{call}/1.0", keys)


class LocksContract:
    def test_a_free_request_is_granted_at_once_with_a_token_per_key(
        self, locks: Locks, now: Callable[[], float]
    ) -> None:
        asked_at = now()
        [g] = locks.enqueue([ask("r1", "c1", stock_A1=W, stock_B2=R)], [None]).grants
        assert set(g.grant.tokens) == {"stock:A1", "stock:B2"}
        assert (g.holder.run_id, g.holder.call_id) == ("r1", "c1")
        assert asked_at + LEASE_S <= g.grant.lease_until <= now() + LEASE_S

    def test_reads_share_and_a_write_waits_then_is_told_when_let_through(
        self, locks: Locks
    ) -> None:
        notice = Outgoing("somewhere", b"wake up")
        assert locks.enqueue([ask("r1", "a", k=R), ask("r2", "b", k=R)], [None, None]).grants
        assert locks.enqueue([ask("r3", "w", k=W)], [notice]).grants == []
        assert locks.release([ask("r1", "a", k=R)]).grants == []  # the other read still holds it
        reply = locks.release([ask("r2", "b", k=R)])
        assert [g.holder.request_id for g in reply.grants] == ["r3/w/1.0"]
        assert reply.notices() == [notice]

    def test_a_request_for_two_keys_waits_whole_while_one_is_held(
        self, locks: Locks, partitions: int
    ) -> None:
        x, y = alike(partitions, 2)  # FIFO per key is within the key's partition
        locks.enqueue([asking("r1", "a", {x: W})], [None])
        assert locks.enqueue([asking("r2", "b", {x: W, y: W})], [None]).grants == []
        assert locks.enqueue([asking("r3", "c", {y: W})], [None]).grants == []
        reply = locks.release([asking("r1", "a", {x: W})])
        assert [g.holder.call_id for g in reply.grants] == ["b"]

    def test_a_request_waiting_in_an_earlier_partition_has_not_queued_in_a_later_one(
        self, locks: Locks, partitions: int
    ) -> None:
        """Ordered acquisition: a request arrives at a partition when its earlier parts
        are held. Until then a later request for a key of that partition goes first."""
        low, high = spread(partitions, 2)
        locks.enqueue([asking("r1", "a", {low: W})], [None])
        assert locks.enqueue([asking("r2", "b", {low: W, high: W})], [None]).grants == []
        got = [
            g.holder.call_id for g in locks.enqueue([asking("r3", "c", {high: W})], [None]).grants
        ]
        assert got == ([] if partitions == 1 else ["c"])

    def test_a_request_asked_again_learns_the_grant_it_holds(self, locks: Locks) -> None:
        first = locks.enqueue([ask("r1", "a", x=W)], [None]).grants
        again = locks.enqueue([ask("r1", "a", x=W)], [None]).grants
        assert [g.grant.tokens for g in again] == [g.grant.tokens for g in first]

    def test_tokens_grow_with_every_grant_of_a_key(self, locks: Locks) -> None:
        tokens = []
        for i in range(3):
            [g] = locks.enqueue([ask("r", f"c{i}", x=W)], [None]).grants
            tokens.append(g.grant.tokens["x"])
            locks.release([ask("r", f"c{i}", x=W)])
        assert tokens == sorted(set(tokens))

    def test_a_holder_that_stops_renewing_loses_its_lock_to_the_next(
        self, locks: Locks, let_time_pass: Wait
    ) -> None:
        locks.enqueue([ask("r1", "a", x=W)], [None])
        locks.enqueue([ask("r2", "b", x=W)], [None])
        for _ in range(3):  # renewing keeps it past its first lease
            let_time_pass(LEASE_S / 3)
            assert locks.renew(ask("r1", "a", x=W))
            assert locks.expire().expired == []
        let_time_pass(LEASE_S + 0.05)
        reply = locks.expire()
        assert [(h.run_id, h.call_id) for h in reply.expired] == [("r1", "a")]
        assert [g.holder.call_id for g in reply.grants] == ["b"]
        assert not locks.renew(ask("r1", "a", x=W)), "a lost lease is not renewed"

    def test_a_release_of_an_unknown_request_changes_nothing(self, locks: Locks) -> None:
        locks.enqueue([ask("r1", "a", x=W)], [None])
        assert locks.release([ask("nobody", "x", x=W)]).grants == []
        assert locks.enqueue([ask("r2", "b", x=W)], [None]).grants == []

    def test_a_release_of_a_waiting_request_takes_it_out_of_the_queue(self, locks: Locks) -> None:
        locks.enqueue([ask("r1", "a", x=W)], [None])
        locks.enqueue([ask("r2", "b", x=W)], [Outgoing("r2-queue", b"b")])
        locks.enqueue([ask("r3", "c", x=W)], [Outgoing("r3-queue", b"c")])
        assert locks.release([ask("r2", "b", x=W)]).grants == []  # the waiter gave up
        reply = locks.release([ask("r1", "a", x=W)])
        assert [g.holder.call_id for g in reply.grants] == ["c"]
        assert reply.notices() == [Outgoing("r3-queue", b"c")]

    # --- over partitions: the same answers, whichever partitions the keys are in ---

    def test_a_request_over_partitions_is_granted_once_with_every_token(
        self, locks: Locks, partitions: int
    ) -> None:
        keys = spread(partitions, 3)
        wide = asking("r1", "a", {k: W for k in keys})
        [g] = locks.enqueue([wide], [None]).grants
        assert set(g.grant.tokens) == set(keys)
        [again] = locks.enqueue([wide], [None]).grants
        assert again.grant.tokens == g.grant.tokens

    def test_a_request_over_partitions_holds_its_first_part_while_the_last_is_busy(
        self, locks: Locks, partitions: int
    ) -> None:
        low, high = spread(partitions, 2)
        notice = Outgoing("r2-queue", b"b")
        locks.enqueue([asking("r1", "a", {high: W})], [None])
        assert locks.enqueue([asking("r2", "b", {low: W, high: W})], [notice]).grants == []
        assert locks.enqueue([asking("r3", "c", {low: R})], [None]).grants == []  # r2 is first
        reply = locks.release([asking("r1", "a", {high: W})])
        assert [g.holder.call_id for g in reply.grants] == ["b"]
        assert reply.notices() == [notice]
        assert set(reply.grants[0].grant.tokens) == {low, high}

    def test_a_request_over_partitions_that_stops_renewing_loses_every_part(
        self, locks: Locks, partitions: int, let_time_pass: Wait
    ) -> None:
        low, high = spread(partitions, 2)
        wide = asking("r1", "a", {low: W, high: W})
        locks.enqueue([wide], [None])
        locks.enqueue([asking("r2", "b", {low: W})], [None])
        locks.enqueue([asking("r3", "c", {high: R})], [None])
        let_time_pass(LEASE_S / 2)
        assert locks.renew(wide) and locks.expire().expired == []
        let_time_pass(LEASE_S + 0.05)
        reply = locks.expire()
        assert [h.call_id for h in reply.expired] == ["a"]
        assert sorted(g.holder.call_id for g in reply.grants) == ["b", "c"]
        assert not locks.renew(wide)

    def test_a_release_drops_a_request_from_every_partition_it_touched(
        self, locks: Locks, partitions: int
    ) -> None:
        keys = spread(partitions, 3)
        locks.enqueue([asking("r1", "a", {keys[-1]: W})], [None])
        locks.enqueue([asking("r2", "b", {k: W for k in keys})], [None])  # holds the low ones
        locks.release([asking("r2", "b", {k: W for k in keys})])
        got = locks.enqueue([asking("r3", "c", {k: W for k in keys[:-1]})], [None]).grants
        assert [g.holder.call_id for g in got] == ["c"]


class LedgerContract:
    def test_a_done_operation_is_replayed_and_another_request_under_its_key_refused(
        self, ledger: Callable[[float], Ledger]
    ) -> None:
        led = ledger(60)
        assert led.begin("op", "req", "r/c1/1", now=1.0).action == "run"
        assert led.begin("op", "req", "r/c2/1", now=2.0).action == "in_progress"
        led.finish("op", "req", "r/c1/1", {"ok": 1}, now=3.0)
        replay = led.begin("op", "req", "r/c3/1", now=4.0)
        assert (replay.action, replay.owner, replay.result) == ("replay", "r/c1/1", {"ok": 1})
        assert led.begin("op", "other", "r/c4/1", now=5.0).action == "conflict"

    def test_a_pending_operation_says_since_when_and_who_owns_it(
        self, ledger: Callable[[float], Ledger]
    ) -> None:
        led = ledger(60)
        began = time.time()  # a Redis ledger takes the time from Redis (TIME), not from `now`
        led.begin("op", "req", "r/c1/1", now=began)
        pending = led.begin("op", "req", "r/c2/1", now=began + 2)
        assert (pending.action, pending.owner) == ("in_progress", "r/c1/1")
        assert (
            pending.since is not None and abs(pending.since - began) < 5
        )  # the first owner's start

    def test_an_abandoned_pending_operation_may_run_again_and_a_done_one_stays(
        self, ledger: Callable[[float], Ledger]
    ) -> None:
        led = ledger(60)
        led.begin("a", "req", "r/c1/1", now=1.0)
        led.abandon("a")
        assert led.begin("a", "req", "r/c2/1", now=2.0).action == "run"
        led.finish("a", "req", "r/c2/1", 1, now=3.0)
        led.abandon("a")
        assert led.begin("a", "req", "r/c3/1", now=4.0).action == "replay"

    def test_a_done_operation_is_forgotten_after_its_keep_time(
        self, ledger: Callable[[float], Ledger], let_time_pass: Wait
    ) -> None:
        led = ledger(1)
        led.begin("k", "req", "r/c1/1", now=1.0)
        led.finish("k", "req", "r/c1/1", 1, now=2.0)
        assert led.begin("k", "req", "r/c2/1", now=2.5).action == "replay"
        let_time_pass(1.2)
        assert led.begin("k", "req", "r/c2/1", now=3.0).action == "run"
