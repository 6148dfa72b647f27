"""The inbox contract (`tests.contracts.inbox`) on the memory inbox; the Redis
inbox passes the same suite in the integration tier."""

from __future__ import annotations

import pytest

from agentledger.services.adapters.inbox.memory_inbox import MemoryInbox
from tests.contracts.inbox import InboxContract


class _Intake:
    def __init__(self, inbox: MemoryInbox) -> None:
        self.inbox = inbox

    def read(self) -> None:
        self.inbox.intake_read()

    def refuse(self, entry_id: str, reason: str) -> None:
        self.inbox.intake_refuse(entry_id, reason)

    def handled(self, entry_id: str) -> None:
        self.inbox.intake_handled(entry_id)

    def beat(self, publisher: str | None = None) -> None:
        self.inbox.intake_beat(publisher)


class TestMemoryInbox(InboxContract):
    @pytest.fixture
    def inbox(self) -> MemoryInbox:
        return MemoryInbox(clock=lambda: 1_700_000_000.0)

    @pytest.fixture
    def intake(self, inbox: MemoryInbox) -> _Intake:
        return _Intake(inbox)
