"""What the CLI prints about a run passes through the run's redactor: its
declared secrets (their values read from this environment) and the well-known
credential patterns. Only `agentledger raw` prints log entries as stored."""

from __future__ import annotations

from typing import Any

from agentledger.events.redact import Redactor
from agentledger.events.types import RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.store.port import EventStore
from agentledger.services.secrets import redactor_for


class RunRedactors:
    """The redactor of each run printed, made from the spec in its first event."""

    def __init__(self, store: EventStore):
        self._store = store
        self._cache: dict[str, Redactor] = {}

    def of(self, run_id: str, first: Envelope[Any] | None = None) -> Redactor:
        r = self._cache.get(run_id)
        if r is None:
            if first is None or not isinstance(first.data, RunCreated):
                first = next(iter(self._store.read(run_id)[:1]), None)
            spec = first.data.spec if first and isinstance(first.data, RunCreated) else None
            r = self._cache[run_id] = redactor_for(spec) if spec else Redactor()
        return r

    def text(self, env: Envelope[Any], printed: str) -> str:
        return self.of(env.run_id, env).text(printed)
