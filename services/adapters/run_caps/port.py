"""The lines of tenants on capped task queues (`agentledger.events.run_caps`): a port
with a Redis adapter (one script, atomic across intakes and workers) and a memory
twin, which pass the same contract tests."""

from __future__ import annotations

from typing import Protocol

from agentledger.events.run_caps import Line


class RunLines(Protocol):
    def admit(self, queue: str, tenant: str, run_id: str, most: int) -> int:
        """The run's place: 0 live, k held k-th (asking again changes nothing)."""
        ...

    def finish(self, queue: str, tenant: str, run_id: str, most: int) -> list[str]:
        """Take the run out of the line (ended, or cancelled while held; idempotent):
        the held runs that go live now, first come first."""
        ...

    def look(self, queue: str, tenant: str) -> Line:
        """The line as it is."""
        ...

    def first_held(self, limit: int) -> list[str]:
        """The first held run of each line that holds one (at most `limit` lines)."""
        ...
