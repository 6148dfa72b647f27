"""Loading a run's state as snapshot + tail over the in-memory store (the suite
every store passes: `tests.contracts.state_cache`; Redis passes it in the
integration tier)."""

from __future__ import annotations

import pytest

from agentledger.services.adapters.store.memory import MemoryEventStore
from tests.contracts.state_cache import StateCacheSuite


class TestStateCacheInMemory(StateCacheSuite):
    @pytest.fixture
    def store(self) -> MemoryEventStore:
        return MemoryEventStore()
