"""The lock script keeps what a waiting request's turn depends on apart from its
message (`waits`: keys, limits, tenant, run), so a grant or release reads that much of
each waiter, not the whole request. A table written before `waits` was kept (a
waiter with no such entry) still grants its waiters, in their turn; an entry an
older worker left behind is removed."""

from __future__ import annotations

import redis

from agentledger.events.lock_step import LockAsk
from agentledger.events.locks import Mode
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.keys import LOCK_PARTS, Keys

KEY = "limit:svc:x"


def ask(run: str, tenant: str) -> LockAsk:
    return LockAsk(run, "c1", f"{run}/c1", {KEY: Mode.SLOT}, {KEY: 1}, tenant)


def test_a_waiter_queued_before_waits_was_kept_is_still_granted_in_its_turn(
    client: redis.Redis, prefix: str
) -> None:
    keys = Keys(prefix, 1)
    locks = RedisLocks(client, keys, lease_s=30.0)
    asks = [ask("a1", "a"), ask("a2", "a"), ask("a3", "a"), ask("b1", "b")]
    [held] = locks.enqueue(asks, [None] * 4).grants
    waits = keys.locks(0)[LOCK_PARTS.index("waits")]
    assert client.hlen(waits) == 3, "one entry a waiting request"
    client.delete(waits)  # as an older release left its table

    order = [held.grant.id]
    for _ in range(3):
        [g] = locks.release([next(x for x in asks if x.request_id == order[-1])]).grants
        order.append(g.grant.id)

    assert order == ["a1/c1", "b1/c1", "a2/c1", "a3/c1"], "B's turn after A's first"
    assert client.hlen(waits) == 0


def test_an_entry_an_older_worker_left_behind_is_removed_by_the_next_release(
    client: redis.Redis, prefix: str
) -> None:
    keys = Keys(prefix, 1)
    locks = RedisLocks(client, keys, lease_s=30.0)
    asks = [ask("a1", "a"), ask("b1", "b")]
    [held] = locks.enqueue(asks, [None, None]).grants
    waits = keys.locks(0)[LOCK_PARTS.index("waits")]
    client.hset(waits, "ghost/c1", '{"k": {"limit:svc:x": "n"}, "l": {}, "t": "a", "u": "ghost"}')

    [g] = locks.release([asks[0]]).grants

    assert g.grant.id == "b1/c1"
    assert client.hlen(waits) == 0
