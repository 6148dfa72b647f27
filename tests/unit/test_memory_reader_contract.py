"""The run reader contract (`tests.contracts.run_reader`) on the memory reader;
the Redis reader passes the same suite in the integration tier."""

from __future__ import annotations

import pytest

from agentledger.services.adapters.reading.memory_reader import MemoryRunReader
from agentledger.services.adapters.store.memory import MemoryEventStore
from tests.contracts.run_reader import RunReaderContract


class TestMemoryRunReader(RunReaderContract):
    @pytest.fixture
    def store(self) -> MemoryEventStore:
        return MemoryEventStore()

    @pytest.fixture
    def reader(self, store: MemoryEventStore) -> MemoryRunReader:
        return MemoryRunReader(store)
