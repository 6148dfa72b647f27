"""The broker admin contract (`tests.contracts.broker_admin`) on the memory
admin; the Redis admin passes the same suite in the integration tier."""

from __future__ import annotations

import pytest

from agentledger.services.adapters.broker.memory_admin import MemoryBrokerAdmin, Stream
from tests.contracts.broker_admin import BrokerAdminContract


class _Pools:
    def __init__(self, admin: MemoryBrokerAdmin) -> None:
        self.admin = admin

    def serve(
        self, worker: str, queue: str, toolset: str, pools: list[str], modules: list[str]
    ) -> None:
        self.admin.serve(worker, queue, toolset, pools, modules)

    def hold(self, worker: str, queue: str, toolset: str, pool: str, count: int) -> None:
        self.admin.hold(worker, count)

    def kill(self, stream: Stream, data: bytes, *, reason: str, deliveries: int) -> str:
        return self.admin.kill(stream, data, reason=reason, deliveries=deliveries)

    def queued(self, stream: Stream) -> list[bytes]:
        return self.admin.queued(stream)


class TestMemoryBrokerAdmin(BrokerAdminContract):
    @pytest.fixture
    def admin(self) -> MemoryBrokerAdmin:
        return MemoryBrokerAdmin()

    @pytest.fixture
    def pools(self, admin: MemoryBrokerAdmin) -> _Pools:
        return _Pools(admin)
