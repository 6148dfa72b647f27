"""The lock table and ledger contracts (`tests.contracts.locks_and_ledger`) on the
Redis adapters, on a real redis-server, where time is Redis's own `TIME` and is
waited for; the in-memory adapters pass the same suites in the unit tier
(`tests/unit/test_memory_locks_and_ledger_contract.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from agentledger.services.adapters.ledger.port import Ledger
from agentledger.services.adapters.ledger.redis_ledger import RedisLedger
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.keys import Keys
from tests.contracts.locks_and_ledger import LEASE_S, LedgerContract, LocksContract


@pytest.fixture
def let_time_pass() -> Callable[[float], None]:
    return time.sleep  # the lease and keep times are Redis's: they pass as real time does


class TestRedisLocks(LocksContract):
    @pytest.fixture(params=[1, 3, 8])
    def partitions(self, request: pytest.FixtureRequest) -> int:
        return int(request.param)

    @pytest.fixture
    def locks(self, client: redis.Redis, prefix: str, partitions: int) -> RedisLocks:
        return RedisLocks(client, Keys(prefix, 1, lock_partitions=partitions), lease_s=LEASE_S)

    @pytest.fixture
    def now(self, client: redis.Redis) -> Callable[[], float]:
        def redis_time() -> float:
            seconds, micros = client.time()
            return float(seconds) + micros / 1e6

        return redis_time


class TestRedisLedger(LedgerContract):
    @pytest.fixture
    def ledger(self, client: redis.Redis, prefix: str) -> Callable[[float], Ledger]:
        return lambda keep_s: RedisLedger(client, Keys(prefix, 1), keep_s=keep_s)
