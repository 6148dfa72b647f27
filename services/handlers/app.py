"""What every handler needs, built once by `bootstrap`: the store, the clock,
the tool registry and the model adapters. Tests build their own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from events.state import RunState
from schemas.spec import ModelSpec
from services.adapters.ledger.redis_ledger import Ledger
from services.adapters.locks.redis_locks import LockService
from services.adapters.models.port import ModelAdapter
from services.adapters.store.port import EventStore
from services.adapters.tools.registry import BUILTIN, ToolRegistry
from services.clock import Clock
from services.handlers.spec_check import tool_paths
from services.settings import Settings


@dataclass(frozen=True)
class App:
    settings: Settings
    store: EventStore
    clock: Clock
    registry: ToolRegistry
    model_for: Callable[[ModelSpec], ModelAdapter]
    worker: str
    locks: LockService
    ledger: Ledger

    def load_tools(self, state: RunState) -> None:
        """Import the run's tool modules (once per process)."""
        self.registry.load([BUILTIN, *state.spec.tools], tool_paths(state.spec, state.base_dir))
