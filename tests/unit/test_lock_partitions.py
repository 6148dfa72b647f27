"""The partitioned lock table (events/lock_partitions.py) on random schedules: never
two conflicting holders of a key, final grants only with every token of the
request and while it holds every part, FIFO per key within its partition, no
deadlock (once holders release, every request is granted) also when a part is
not sent on (its sender died) and the waiting run asks again, and with one
partition the very rule of events/locks.py."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.events import locks
from agentledger.events.lock_partitions import (
    Partitioned,
    enqueue_all,
    expire_all,
    final_partition,
    partition_of,
    partitions,
    release_many,
    renew_final,
    split,
)
from agentledger.events.locks import Grant, LockTable, Mode, Request, conflicts

T0 = 1_700_000_000.0
KEYS = tuple(f"file:/w/{c}" for c in "abcdefghij")
LEASE_S = 2.0
seeds = st.integers(0, 2**32 - 1)


def random_keys(rng: random.Random) -> dict[str, Mode]:
    chosen = rng.sample(KEYS, rng.randint(1, 4))
    return {k: rng.choice((Mode.READ, Mode.WRITE)) for k in chosen}


def check_invariants(m: Partitioned, asked: Mapping[str, Request]) -> None:
    for p, t in enumerate(m.tables):
        for key, hs in t.holders.items():
            assert partition_of(key, m.n) == p, "a key lives in its own partition"
            modes = list(hs.values())
            assert not any(conflicts(a, b) for i, a in enumerate(modes) for b in modes[i + 1 :]), (
                f"conflicting holders of {key}: {hs}"
            )
        order = list(t.requests)
        for rid in t.waiting():  # FIFO: no holder of a key arrived after a waiter it blocks
            r = t.requests[rid]
            for key, mode in r.keys.items():
                for h, hm in t.holders.get(key, {}).items():
                    if conflicts(mode, hm):
                        assert order.index(h) < order.index(rid), f"{h} overtook {rid} on {key}"
        for rid in t.leases:  # a final holder holds every part below
            for q in partitions(asked[rid].keys, m.n):
                assert rid in m.tables[q].held, f"{rid} final without its part in {q}"


def check_final(m: Partitioned, grants: list[Grant], asked: Mapping[str, Request]) -> None:
    for g in grants:
        assert g.final and set(g.tokens) == set(asked[g.id].keys), "all tokens or none"
        for q in partitions(asked[g.id].keys, m.n):
            assert g.id in m.tables[q].held


def schedule(
    m: Partitioned, rng: random.Random, steps: int
) -> tuple[Partitioned, dict[str, Request]]:
    now = T0
    asked: dict[str, Request] = {}
    for i in range(steps):
        roll = rng.random()
        if roll < 0.5:
            rs = []
            for _ in range(rng.randint(1, 3)):
                if asked and rng.random() < 0.2:
                    rs.append(asked[rng.choice(sorted(asked))])
                else:
                    r = Request(f"r{i}.{len(rs)}", random_keys(rng), LEASE_S)
                    asked[r.id] = r
                    rs.append(r)
            m, grants = enqueue_all(m, rs, now=now)
        elif roll < 0.75 and asked:
            rid = rng.choice(sorted(asked))
            m, grants = release_many(m, {rid: asked[rid].keys}, now=now)
        elif roll < 0.85 and asked:
            rid = rng.choice(sorted(asked))
            m, _ = renew_final(m, rid, asked[rid].keys, now=now)
            grants = []
        else:
            now += rng.choice((0.5, 1.0, 3.0))
            m, _, grants = expire_all(m, now=now)
        check_invariants(m, asked)
        check_final(m, grants, asked)
    return m, asked


@settings(max_examples=150, deadline=None)
@given(seeds, st.sampled_from((1, 2, 3, 8)))
def test_random_schedules_keep_safety_fifo_and_all_or_nothing(seed: int, n: int) -> None:
    schedule(Partitioned.empty(n), random.Random(seed), 30)


@settings(max_examples=150, deadline=None)
@given(seeds, st.sampled_from((2, 3, 8)))
def test_once_holders_release_every_request_is_granted(seed: int, n: int) -> None:
    rng = random.Random(seed)
    m = Partitioned.empty(n)
    asked = [Request(f"r{i}", random_keys(rng), LEASE_S) for i in range(rng.randint(2, 12))]
    granted: set[str] = set()
    for r in asked:  # one by one, as runs ask
        m, grants = enqueue_all(m, [r], now=T0)
        granted |= {g.id for g in grants}
    by_id = {r.id: r for r in asked}
    while held := [rid for t in m.tables for rid in t.leases]:
        m, grants = release_many(m, {held[0]: by_id[held[0]].keys}, now=T0)
        check_invariants(m, by_id)
        check_final(m, grants, by_id)
        granted |= {g.id for g in grants}
    assert granted == set(by_id), "no deadlock: everyone got through"
    assert all(not t.requests for t in m.tables)


@settings(max_examples=100, deadline=None)
@given(seeds, st.sampled_from((2, 3, 8)))
def test_a_part_its_sender_never_sent_on_goes_on_when_the_run_asks_again(seed: int, n: int) -> None:
    """A release in one partition that the releasing process never followed up: the
    partial holds it made are sent on by the waiting runs' re-asks."""
    rng = random.Random(seed)
    m = Partitioned.empty(n)
    asked = [Request(f"r{i}", random_keys(rng), LEASE_S) for i in range(rng.randint(2, 10))]
    by_id = {r.id: r for r in asked}
    granted: set[str] = set()
    for r in asked:
        m, grants = enqueue_all(m, [r], now=T0)
        granted |= {g.id for g in grants}
    while held := [rid for t in m.tables for rid in t.leases]:
        rid = held[0]
        for p in sorted(partitions(by_id[rid].keys, n), reverse=True):  # it dies after each
            t, _ = locks.release_all(m.tables[p], [rid], now=T0)
            m = m._with(p, t)
        check_invariants(m, by_id)
        for r in asked:  # the sweeper re-asks every waiting run
            if r.id not in granted:
                m, grants = enqueue_all(m, [r], now=T0)
                check_final(m, grants, by_id)
                granted |= {g.id for g in grants}
    assert granted == set(by_id)


@settings(max_examples=60, deadline=None)
@given(seeds, st.sampled_from((2, 3, 8)))
def test_an_expiry_pass_sends_on_a_partial_hold_nobody_asks_for_again(seed: int, n: int) -> None:
    rng = random.Random(seed)
    m = Partitioned.empty(n)
    asked = [Request(f"r{i}", random_keys(rng), LEASE_S) for i in range(rng.randint(2, 10))]
    by_id = {r.id: r for r in asked}
    for r in asked:
        m, _ = enqueue_all(m, [r], now=T0)
    for p, t in enumerate(m.tables):  # holders released where their lease is, then died
        t, _ = locks.release_all(t, list(t.leases), now=T0)
        m = m._with(p, t)
    now = T0
    for _ in range(len(asked) * n + 1):  # nobody renews, nobody asks again: leases end it all
        if not any(t.requests for t in m.tables):
            break
        now += 2 * LEASE_S
        m, _, _ = expire_all(m, now=now)
        check_invariants(m, by_id)
    assert all(not t.requests for t in m.tables), "no hold is left behind"


@settings(max_examples=150, deadline=None)
@given(seeds)
def test_with_one_partition_it_is_the_rule_of_events_locks(seed: int) -> None:
    rng = random.Random(seed)
    m, t, now = Partitioned.empty(1), LockTable(), T0
    asked: dict[str, Request] = {}
    for i in range(30):
        roll = rng.random()
        if roll < 0.5:
            rs = [Request(f"r{i}.{j}", random_keys(rng), LEASE_S) for j in range(rng.randint(1, 3))]
            asked |= {r.id: r for r in rs}
            held = set(t.held)
            m, got = enqueue_all(m, rs, now=now)
            t, want = locks.enqueue(t, rs, now=now)
            want += [g for r in rs if r.id in held and (g := t.holding(r.id)) is not None]
        elif roll < 0.75 and asked:
            rid = rng.choice(sorted(asked))
            m, got = release_many(m, {rid: asked[rid].keys}, now=now)
            t, want = locks.release(t, rid, now=now)
        elif roll < 0.85 and asked:
            rid = rng.choice(sorted(asked))
            m, ok = renew_final(m, rid, asked[rid].keys, now=now)
            t, ok2 = locks.renew(t, rid, now=now)
            assert ok == ok2
            got = want = []
        else:
            now += rng.choice((0.5, 1.0, 3.0))
            m, gone, got = expire_all(m, now=now)
            t, expired, want = locks.expire(t, now=now)
            assert [r.id for r in gone] == expired
        assert got == want
        mine = m.tables[0]
        assert (mine.holders, mine.tokens, mine.leases, mine.held) == (
            t.holders,
            t.tokens,
            t.leases,
            t.held,
        )
        assert [(r.id, r.keys) for r in mine.requests.values()] == [
            (r.id, r.keys) for r in t.requests.values()
        ]


def test_a_request_is_split_by_partition_in_ascending_order() -> None:
    keys = {k: Mode.WRITE for k in KEYS}
    parts = split(keys, 3)
    assert [p for p, _ in parts] == sorted({partition_of(k, 3) for k in KEYS})
    assert {k for _, ks in parts for k in ks} == set(KEYS)
    assert final_partition(KEYS, 3) == parts[-1][0]
    # stable across processes and versions (crc32, not the salted hash()): the values
    # every deployment computed so far, pinned
    assert [partition_of(k, 8) for k in ("file:/w/a", "file:/w/b", "stock:A1")] == [1, 3, 2]
    assert [partition_of("file:/w/a", n) for n in (1, 3, 16)] == [0, 2, 1]


def test_a_two_partition_request_holds_its_first_part_while_it_waits_on_the_second() -> None:
    n = 8
    a, b = next((x, y) for x in KEYS for y in KEYS if partition_of(x, n) < partition_of(y, n))
    m = Partitioned.empty(n)
    m, [blocker] = enqueue_all(m, [Request("blocker", {b: Mode.WRITE}, LEASE_S)], now=T0)
    m, grants = enqueue_all(m, [Request("both", {a: Mode.WRITE, b: Mode.WRITE}, LEASE_S)], now=T0)
    assert grants == []
    assert m.tables[partition_of(a, n)].partials() == ["both"]
    m, later = expire_all(m, now=T0 + LEASE_S / 2)[0], None  # a partial hold has no lease
    assert m.tables[partition_of(a, n)].partials() == ["both"] and later is None
    m, [g] = release_many(m, {"blocker": [b]}, now=T0 + 1)
    assert g.id == "both" and set(g.tokens) == {a, b} and g.lease_until == T0 + 1 + LEASE_S
    assert blocker.tokens[b] < g.tokens[b]
