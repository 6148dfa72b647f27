"""Concurrency keys, pure (events/limits.py and the slot rule of events/locks.py):
a key filled in from a call's arguments and its principal's tenant, refused when a
value could reach another key or make keys without end; the operator's max over
the tool's; slots granted up to their max across runs, first come first served per
key, all or nothing with the call's locks, given back by a release or an expiry,
and leaving no token behind."""

from __future__ import annotations

import pytest

from agentledger.events.limits import LimitError, fill, parse_operator_limits, resolve
from agentledger.events.locks import LockTable, Mode, Request, enqueue, expire, fair, release
from agentledger.schemas.limits import Limit

N, W = Mode.SLOT, Mode.WRITE
T0 = 1_700_000_000.0
PAY = "limit:svc:payments"


def slot(rid: str, most: int = 2, *, lease_s: float = 5.0, **locks: Mode) -> Request:
    return Request(rid, {PAY: N, **locks}, lease_s, limits={PAY: most})


def test_a_key_is_filled_in_from_the_tenant_and_the_arguments() -> None:
    assert fill("tenant:{tenant}:payments", {}, "shop-1") == "tenant:shop-1:payments"
    assert fill("acct:{account}:pay", {"account": 42}, "t") == "acct:42:pay"


@pytest.mark.parametrize(
    "value",
    ["B:payments", "a/b", "x" * 65, "", "a b", "{tenant}", True, 1.5, ["a"], {"a": 1}],
)
def test_a_hostile_argument_cannot_make_another_key(value: object) -> None:
    """No `:` (the key keeps its template's segments: tenant A cannot name
    `tenant:B:payments`), bounded length and characters (no keys without end)."""
    with pytest.raises(LimitError, match="limit key 'tenant:{acct}:payments'"):
        fill("tenant:{acct}:payments", {"acct": value}, "A")


def test_a_tenant_name_that_is_not_a_key_value_is_refused_not_spliced() -> None:
    with pytest.raises(LimitError, match="'tenant' is 'a:b'"):
        fill("tenant:{tenant}:x", {}, "a:b")


def test_a_missing_argument_is_named() -> None:
    with pytest.raises(LimitError, match="no argument 'account'"):
        fill("acct:{account}", {}, "t")


def test_a_template_must_begin_with_a_literal_segment() -> None:
    with pytest.raises(ValueError, match="pattern"):
        Limit(key="{region}:payments", max=3)


def test_the_operators_limit_takes_precedence_over_the_tools() -> None:
    declared = [Limit(key="svc:payments", max=1000), Limit(key="tenant:{tenant}:payments", max=50)]
    operator = {"svc:payments": 10, "tenant:{tenant}:payments": 2, "tenant:vip:payments": 5}
    assert resolve(declared, {}, "shop", operator) == (
        ("svc:payments", 10),
        ("tenant:shop:payments", 2),
    )
    assert dict(resolve(declared, {}, "vip", operator))["tenant:vip:payments"] == 5
    assert resolve(declared, {}, "shop", {}) == (
        ("svc:payments", 1000),
        ("tenant:shop:payments", 50),
    )


def test_the_operators_limits_are_read_with_a_clear_error() -> None:
    assert parse_operator_limits("svc:payments=10, tenant:{tenant}:payments=2") == {
        "svc:payments": 10,
        "tenant:{tenant}:payments": 2,
    }
    for bad, said in [
        ("svc:payments", "is not KEY=MAX"),
        ("svc:payments=ten", "not a whole number"),
        ("svc:payments=0", "at least 1"),
        ("{x}=3", "is not a limit key"),
    ]:
        with pytest.raises(ValueError, match=said):
            parse_operator_limits(bad)


def test_slots_are_granted_up_to_the_max_across_runs_and_the_rest_wait_in_order() -> None:
    t, grants = enqueue(LockTable(), [slot(f"r{i}/c/1") for i in range(5)], now=T0)
    assert [g.id for g in grants] == ["r0/c/1", "r1/c/1"]
    assert set(t.holders[PAY]) == {"r0/c/1", "r1/c/1"}
    t, grants = release(t, "r1/c/1", now=T0 + 1)
    assert [g.id for g in grants] == ["r2/c/1"], "the earliest waiter, not a later one"
    t, grants = enqueue(t, [slot("late/c/1", most=4)], now=T0 + 1)
    assert grants == [], "a later request with a higher max does not pass the waiters"


def test_a_slot_is_all_or_nothing_with_the_calls_locks() -> None:
    t, _ = enqueue(LockTable(), [Request("w/c/1", {"stock:A": W}, 5.0)], now=T0)
    t, grants = enqueue(t, [slot("r/c/1", **{"stock:A": W})], now=T0)
    assert grants == [] and PAY not in t.holders, "no slot held while its lock waits"
    t, grants = release(t, "w/c/1", now=T0)
    assert [g.id for g in grants] == ["r/c/1"] and set(grants[0].tokens) == {PAY, "stock:A"}


def test_a_dead_holders_slot_comes_back_after_its_lease() -> None:
    t, _ = enqueue(LockTable(), [slot("dead/c/1", 1, lease_s=2.0), slot("next/c/1", 1)], now=T0)
    t, expired, grants = expire(t, now=T0 + 2.0)
    assert expired == ["dead/c/1"] and [g.id for g in grants] == ["next/c/1"]
    assert grants[0].tokens[PAY] > T0 * 1e6


def test_a_slot_key_leaves_no_token_behind_and_its_next_token_is_larger() -> None:
    t, [first] = enqueue(LockTable(), [slot("a/c/1", 1)], now=T0)
    t, _ = release(t, "a/c/1", now=T0)
    assert PAY not in t.tokens and PAY not in t.holders
    t, [second] = enqueue(t, [slot("b/c/1", 1)], now=T0 + 0.5)
    assert second.tokens[PAY] > first.tokens[PAY]


def test_a_slot_and_a_lock_of_the_same_name_exclude_each_other() -> None:
    t, [g] = enqueue(LockTable(), [slot("a/c/1", 5)], now=T0)
    t, grants = enqueue(t, [Request("b/c/1", {PAY: Mode.READ}, 5.0)], now=T0)
    assert g.id == "a/c/1" and grants == []


def fair_slot(rid: str, run: str, tenant: str) -> Request:
    return Request(rid, {PAY: N}, 5.0, limits={PAY: 1}, run=run, tenant=tenant)


def test_one_tenants_500_waiting_calls_do_not_hold_another_tenants_one_behind_them() -> None:
    burst = [fair_slot(f"a{i}/c/1", f"a{i}", "A") for i in range(500)]
    t, [first] = enqueue(LockTable(), burst, now=T0)
    t, none = enqueue(t, [fair_slot("b/c/1", "b", "B")], now=T0)
    assert first.id == "a0/c/1" and none == []
    t, [second] = release(t, "a0/c/1", now=T0 + 1)
    assert second.id == "b/c/1", "B's one call is next: A was served last, B never"
    t, [third] = release(t, "b/c/1", now=T0 + 2)
    assert third.id == "a1/c/1", "then A's calls, in their order"
    assert len(t.served) == 2, "only the names still waiting are remembered (A and a run)"


def test_within_a_tenant_runs_take_turns_and_a_runs_calls_keep_their_order() -> None:
    many = [fair_slot(f"r1/c{i}/1", "r1", "A") for i in range(3)]
    t, [g] = enqueue(LockTable(), many + [fair_slot("r2/c0/1", "r2", "A")], now=T0)
    order = []
    while g is not None:
        order.append(g.id)
        t, grants = release(t, g.id, now=T0)
        g = grants[0] if grants else None
    assert order == ["r1/c0/1", "r2/c0/1", "r1/c1/1", "r1/c2/1"]


def test_requests_without_a_tenant_are_served_in_arrival_order() -> None:
    t, _ = enqueue(LockTable(), [slot(f"x{i}", 1) for i in range(4)], now=T0)
    assert fair(t) == ["x1", "x2", "x3"]
