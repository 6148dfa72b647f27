"""The pure resource-lock rule (events/locks.py): read/read shares, read/write
and write/write exclude, all or none, first come first served per key, leases
that expire and pass the lock on, stale releases ignored, and fencing tokens
that only grow — also when the token table is lost."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.events.locks import (
    Grant,
    LockTable,
    Mode,
    Request,
    conflicts,
    enqueue,
    expire,
    pump,
    release,
    renew,
    resources,
)

R, W = Mode.READ, Mode.WRITE
T0 = 1_700_000_000.0
LEASE_S = 5.0


def ask(rid: str, lease_s: float = LEASE_S, **keys: Mode) -> Request:
    return Request(rid, dict(keys), lease_s)


def held(t: LockTable) -> set[str]:
    return set(t.leases)


def ids(grants: list[Grant]) -> list[str]:
    return [g.id for g in grants]


def table_with(*requests: Request, now: float = T0) -> tuple[LockTable, list[Grant]]:
    return enqueue(LockTable(), requests, now=now)


# --- sharing and excluding -------------------------------------------------------------


def test_the_conflict_rule_is_that_any_write_excludes() -> None:
    assert not conflicts(R, R)
    assert conflicts(R, W) and conflicts(W, R) and conflicts(W, W)


def test_two_reads_of_one_key_share_it() -> None:
    t, grants = table_with(ask("r1", a=R), ask("r2", a=R))
    assert ids(grants) == ["r1", "r2"]
    assert t.holders["a"] == {"r1": R, "r2": R}
    assert t.waiting() == []


def test_a_write_waits_for_a_read_of_the_same_key() -> None:
    t, grants = table_with(ask("r1", a=R), ask("w1", a=W))
    assert ids(grants) == ["r1"]
    assert t.waiting() == ["w1"]


def test_a_read_waits_for_a_write_of_the_same_key() -> None:
    t, grants = table_with(ask("w1", a=W), ask("r1", a=R))
    assert ids(grants) == ["w1"]
    assert t.waiting() == ["r1"]


def test_two_writes_of_one_key_exclude_each_other() -> None:
    t, grants = table_with(ask("w1", a=W), ask("w2", a=W))
    assert ids(grants) == ["w1"]
    assert t.waiting() == ["w2"]


def test_requests_on_different_keys_never_wait_for_each_other() -> None:
    t, grants = table_with(ask("w1", a=W), ask("w2", b=W), ask("r1", c=R))
    assert ids(grants) == ["w1", "w2", "r1"]


def test_a_write_of_a_key_also_covers_reading_it() -> None:
    assert resources(reads=["a", "b"], writes=["b", "c"]) == {"a": R, "b": W, "c": W}


# --- all or none -------------------------------------------------------------------------


def test_a_request_for_two_keys_waits_whole_when_one_is_held() -> None:
    t, _ = table_with(ask("holder", b=W))
    t, grants = enqueue(t, [ask("both", a=W, b=W)], now=T0 + 1)
    assert grants == []
    assert t.waiting() == ["both"]
    assert "a" not in t.holders, "it took none of its keys while one was held"
    t, grants = release(t, "holder", now=T0 + 2)
    assert ids(grants) == ["both"]
    assert set(grants[0].tokens) == {"a", "b"}
    assert t.holders == {"a": {"both": W}, "b": {"both": W}}


def test_a_waiting_multi_key_request_is_not_overtaken_on_its_free_key() -> None:
    """FIFO per key: the waiter for {a, b} keeps a later writer of `a` out, so it
    cannot be starved by a stream of requests on its free key."""
    t, _ = table_with(ask("holder", b=W))
    t, _ = enqueue(t, [ask("both", a=W, b=W), ask("later", a=W)], now=T0 + 1)
    assert t.waiting() == ["both", "later"]
    t, grants = release(t, "holder", now=T0 + 2)
    assert ids(grants) == ["both"]
    t, grants = release(t, "both", now=T0 + 3)
    assert ids(grants) == ["later"]


# --- first come, first served ------------------------------------------------------------


def test_reads_arriving_after_a_waiting_write_do_not_get_ahead_of_it() -> None:
    t, _ = table_with(ask("r1", a=R))
    t, _ = enqueue(t, [ask("w", a=W)], now=T0 + 1)
    for i in range(2, 12):  # a steady stream of readers
        t, grants = enqueue(t, [ask(f"r{i}", a=R)], now=T0 + i)
        assert grants == [], f"r{i} overtook the waiting write"
    t, grants = release(t, "r1", now=T0 + 20)
    assert ids(grants) == ["w"], "the write is served first: no starvation"
    t, grants = release(t, "w", now=T0 + 21)
    assert ids(grants) == [f"r{i}" for i in range(2, 12)], "then every reader at once"
    assert t.waiting() == []


def test_a_read_behind_a_waiting_read_is_not_held_back() -> None:
    """Only a conflicting earlier waiter blocks: read/read does not."""
    t, _ = table_with(ask("w", b=W))
    t, grants = enqueue(t, [ask("rb", a=R, b=R), ask("ra", a=R)], now=T0 + 1)
    assert ids(grants) == ["ra"]
    assert t.waiting() == ["rb"]


def test_a_request_asked_twice_is_queued_once() -> None:
    t, _ = table_with(ask("w1", a=W), ask("w2", a=W))
    t, grants = enqueue(t, [ask("w2", a=W), ask("w1", a=W)], now=T0 + 1)
    assert grants == []
    assert list(t.requests) == ["w1", "w2"]


# --- release, expiry, renewal --------------------------------------------------------------


def test_a_release_passes_the_lock_on_to_the_next_waiter() -> None:
    t, _ = table_with(ask("w1", a=W), ask("w2", a=W), ask("w3", a=W))
    t, grants = release(t, "w1", now=T0 + 1)
    assert ids(grants) == ["w2"]
    assert t.holders["a"] == {"w2": W}
    assert t.waiting() == ["w3"]


def test_releasing_a_waiter_drops_it_from_the_queue_and_unblocks_those_behind() -> None:
    t, _ = table_with(ask("r", a=R), ask("w", a=W), ask("r2", a=R))
    t, grants = release(t, "w", now=T0 + 1)
    assert ids(grants) == ["r2"]
    assert t.waiting() == []


def test_an_expired_lease_passes_the_lock_on() -> None:
    t, _ = table_with(ask("dead", a=W, lease_s=2.0), ask("next", a=W))
    t, expired, grants = expire(t, now=T0 + 1.999)
    assert expired == [] and grants == []
    t, expired, grants = expire(t, now=T0 + 2.0)  # the lease ends at its instant
    assert expired == ["dead"]
    assert ids(grants) == ["next"]
    assert "dead" not in t.requests


def test_a_renewed_lease_does_not_expire_and_a_lost_one_cannot_be_renewed() -> None:
    t, _ = table_with(ask("h", a=W, lease_s=2.0), ask("next", a=W))
    t, ok = renew(t, "h", now=T0 + 1.5)
    assert ok and t.leases["h"] == T0 + 3.5
    t, expired, _ = expire(t, now=T0 + 3.0)
    assert expired == []
    t, expired, grants = expire(t, now=T0 + 3.5)
    assert expired == ["h"] and ids(grants) == ["next"]
    t, ok = renew(t, "h", now=T0 + 3.6)
    assert not ok, "a holder that lost its lease does not get it back by renewing"
    assert t.holders["a"] == {"next": W}


def test_a_waiter_cannot_renew_a_lease_it_does_not_have() -> None:
    t, _ = table_with(ask("h", a=W), ask("waiter", a=W))
    after, ok = renew(t, "waiter", now=T0 + 1)
    assert not ok and after is t


def test_an_unknown_release_changes_nothing() -> None:
    t, _ = table_with(ask("h", a=W), ask("waiter", a=W))
    after, grants = release(t, "nobody", now=T0 + 1)
    assert after is t and grants == []


def test_a_stale_release_by_an_expired_holder_does_not_free_the_new_holder() -> None:
    t, _ = table_with(ask("dead", a=W, lease_s=1.0), ask("next", a=W), ask("third", a=W))
    t, _, grants = expire(t, now=T0 + 1)
    assert ids(grants) == ["next"]
    t, grants = release(t, "dead", now=T0 + 2)  # the dead holder's late release
    assert grants == []
    assert t.holders["a"] == {"next": W}
    assert t.waiting() == ["third"]


# --- fencing tokens ----------------------------------------------------------------------


def test_tokens_are_at_least_now_in_microseconds() -> None:
    _, grants = table_with(ask("w", a=W, b=R), now=T0 + 0.25)
    assert grants[0].tokens == {"a": 1_700_000_000_250_000, "b": 1_700_000_000_250_000}
    assert grants[0].lease_until == T0 + 0.25 + LEASE_S


def test_tokens_strictly_increase_per_key_even_within_one_microsecond() -> None:
    t = LockTable()
    seen: list[int] = []
    for i in range(5):  # all at the same instant: the counter part takes over
        t, grants = enqueue(t, [ask(f"w{i}", a=W)], now=T0)
        seen.append(grants[0].tokens["a"])
        t, _ = release(t, f"w{i}", now=T0)
    assert seen == [int(T0 * 1e6) + i for i in range(5)]
    t, grants = table_with(ask("r1", a=R), ask("r2", a=R))  # sharers get distinct tokens too
    assert grants[0].tokens["a"] < grants[1].tokens["a"]


def test_tokens_stay_monotonic_when_the_token_table_is_lost() -> None:
    t, first = table_with(ask("w1", a=W), now=T0)
    t, _ = release(t, "w1", now=T0 + 0.5)
    _, second = enqueue(t, [ask("w2", a=W)], now=T0 + 0.5)
    fresh, after_loss = table_with(ask("w3", a=W), now=T0 + 1.0)  # a restart lost every token
    assert first[0].tokens["a"] < second[0].tokens["a"] < after_loss[0].tokens["a"]
    assert fresh.tokens == {"a": int((T0 + 1.0) * 1e6)}


# --- properties over random schedules ----------------------------------------------------

KEYS = ("a", "b", "c")
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("enqueue"),
            st.dictionaries(st.sampled_from(KEYS), st.sampled_from([R, W]), min_size=1),
            st.sampled_from([0.5, 1.0, 2.0]),
        ),
        st.tuples(st.just("release"), st.integers(0, 30)),
        st.tuples(st.just("renew"), st.integers(0, 30)),
        st.tuples(st.just("tick"), st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])),
    ),
    max_size=40,
)


def check_invariants(t: LockTable, tokens_seen: dict[str, int]) -> None:
    order = list(t.requests)
    for key, holders in t.holders.items():
        modes = list(holders.values())
        for x, y in itertools.combinations(modes, 2):
            assert not conflicts(x, y), f"holders of {key!r} conflict: {holders}"
        assert set(holders) <= set(t.leases), f"{key!r} held by a request without a lease"
    for rid in t.leases:  # all: a holder holds every key it asked for
        for key, mode in t.requests[rid].keys.items():
            assert t.holders.get(key, {}).get(rid) is mode, f"{rid} lacks {key!r}"
    for rid in t.waiting():  # none: a waiter holds nothing
        assert all(rid not in hs for hs in t.holders.values()), f"waiter {rid} holds a key"
    for w in t.waiting():  # FIFO: no later request holds a key an earlier waiter conflicts on
        for h in t.leases:
            if order.index(h) > order.index(w):
                shared = t.requests[w].keys.keys() & t.requests[h].keys.keys()
                assert not any(
                    conflicts(t.requests[w].keys[k], t.requests[h].keys[k]) for k in shared
                ), f"{h} overtook the earlier waiter {w} on {shared}"
    _, grants = pump(t, now=0.0)
    assert grants == [], "a waiter that could have been granted was left waiting"
    for key, token in t.tokens.items():
        assert token >= tokens_seen.get(key, 0)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_holders_never_conflict_and_tokens_only_grow(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    t, now, serial = LockTable(), T0, itertools.count()
    made: list[str] = []
    last_token: dict[str, int] = {}
    for step in steps:
        grants: list[Grant] = []
        match step:
            case ("enqueue", keys, lease_s):
                rid = f"q{next(serial)}"
                made.append(rid)
                t, grants = enqueue(t, [Request(rid, keys, lease_s)], now=now)
            case ("release", i):
                t, grants = release(t, made[i % len(made)] if made else "none", now=now)
            case ("renew", i):
                t, _ = renew(t, made[i % len(made)] if made else "none", now=now)
            case ("tick", dt):
                now += dt
                t, _, grants = expire(t, now=now)
        for g in grants:
            for key, token in g.tokens.items():
                assert token > last_token.get(key, 0), f"token of {key!r} did not grow"
                assert token >= int(now * 1_000_000)
                last_token[key] = token
            assert g.lease_until == now + t.requests[g.id].lease_s
        check_invariants(t, last_token)
