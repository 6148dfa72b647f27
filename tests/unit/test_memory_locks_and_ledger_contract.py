"""The lock table and ledger contracts (`tests.contracts.locks_and_ledger`) on the
in-memory adapters, the ones the handler tests run on, with a clock that moves
only when the suite lets time pass; the Redis adapters pass the same suites in
the integration tier."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentledger.services.adapters.ledger.memory_ledger import MemoryLedger
from agentledger.services.adapters.ledger.port import Ledger
from agentledger.services.adapters.locks.memory_locks import MemoryLocks
from tests.contracts.clock import ManualClock
from tests.contracts.locks_and_ledger import LEASE_S, LedgerContract, LocksContract


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def let_time_pass(clock: ManualClock) -> Callable[[float], None]:
    return clock.advance


class TestMemoryLocks(LocksContract):
    @pytest.fixture(params=[1, 3, 8])
    def partitions(self, request: pytest.FixtureRequest) -> int:
        return int(request.param)

    @pytest.fixture
    def locks(self, clock: ManualClock, partitions: int) -> MemoryLocks:
        return MemoryLocks(clock, lease_s=LEASE_S, partitions=partitions)

    @pytest.fixture
    def now(self, clock: ManualClock) -> Callable[[], float]:
        return clock.now


class TestMemoryLedger(LedgerContract):
    @pytest.fixture
    def ledger(self, clock: ManualClock) -> Callable[[float], Ledger]:
        return lambda keep_s: MemoryLedger(clock, keep_s=keep_s)
