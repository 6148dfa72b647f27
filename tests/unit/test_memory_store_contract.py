"""The event store contract (`tests.contracts.event_store`) on the in-memory
adapter, the one the handler tests run on; the Redis adapter passes the same
suite in the integration tier."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.keys import Keys
from tests.contracts.event_store import EventStoreContract


class TestMemoryEventStore(EventStoreContract):
    @pytest.fixture
    def store(self) -> MemoryEventStore:
        return MemoryEventStore()

    @pytest.fixture
    def queued(self, store: MemoryEventStore) -> Callable[[str], list[bytes]]:
        return store.outbox.peek

    @pytest.fixture
    def stream(self) -> str:
        keys = Keys("unit", 1)
        return keys.queue(keys.shard("run-a"), "default", "fp", "model")
