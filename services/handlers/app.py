"""What every handler needs, built once by `bootstrap`: the run repository and
its step engine (`engine.take`, the one door to a run's log), the store, the
clock, this worker's tool set, the model adapters, the lock table, the ledger.
Tests build their own (with the in-memory adapters, or Redis)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from agentledger.events.commands import Pool
from agentledger.events.state import RunState
from agentledger.schemas.spec import ModelSpec
from agentledger.services.adapters.ledger.port import Ledger
from agentledger.services.adapters.live_text import LiveText
from agentledger.services.adapters.locks.port import Locks
from agentledger.services.adapters.models.port import ModelAdapter
from agentledger.services.adapters.snapshots.taker import Snapshotter, snapshotter
from agentledger.services.adapters.store.port import EventStore, Outgoing
from agentledger.services.adapters.tools.sandbox import SandboxPolicy, policy_for
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.clock import Clock
from agentledger.services.handlers.engine import Engine
from agentledger.services.handlers.runs import Runs
from agentledger.services.handlers.turns import Turns
from agentledger.services.settings import Settings

if TYPE_CHECKING:  # dramatiq, only where commands are sent (not in `agentledger context`)
    from agentledger.services.adapters.broker.outbox import Outbox


@dataclass(frozen=True)
class Carrying:
    """What this process carries on itself (`agentledger.services.handlers.carry`): the next step
    of a run of its task queue and tool set, due in one of the pools it serves, for
    at most `for_s` seconds per delivery, and nothing once it is `stopping`."""

    queue: str
    pools: frozenset[Pool]
    for_s: float
    stopping: threading.Event = field(default_factory=threading.Event)
    # the runs in hand and the threads that carry them, handing turns on (fair carrying)
    turns: Turns[Any] = field(default_factory=lambda: Turns(shared_s=0.0))


@dataclass(frozen=True)
class App:
    settings: Settings
    runs: Runs
    clock: Clock
    toolset: ToolSet
    model_for: Callable[[ModelSpec], ModelAdapter]
    worker: str
    locks: Locks
    ledger: Ledger
    outbox: Outbox
    send: Callable[[Sequence[Outgoing]], None]
    # the workers holding a run's claims that are proven dead (`worker_deaths`); none by default
    dead_workers: Callable[[RunState], frozenset[str]] = lambda s: frozenset()
    carrying: Carrying | None = None  # None: every next step goes through its queue
    # the sweeper's re-drives: each only where no message for its command still waits
    # (`agentledger.services.adapters.broker.outbox.Resend`); None: `send`, unchecked
    resend: Callable[[Sequence[Outgoing]], None] | None = None
    # where a model reply's text goes while it streams (the web view's); None: nowhere
    live_text: LiveText | None = None

    @cached_property
    def engine(self) -> Engine:
        """The step engine over `runs`: every append to a run goes through its `take`."""
        return Engine(self.runs)

    @cached_property
    def sandbox(self) -> SandboxPolicy:
        """The sandbox the settings describe, made once per app (not per call: a
        Settings object hashes all its fields)."""
        return policy_for(self.settings)

    @cached_property
    def snapshots(self) -> Snapshotter | None:
        """This process's workspace snapshotter (None: the operator switched snapshots off)."""
        return snapshotter(self.settings)

    @property
    def store(self) -> EventStore:
        return self.runs.store

    def serves(self, state: RunState) -> bool:
        """Bound to this worker's code: a run of another tool set is never touched here."""
        return state.toolset == self.toolset.fingerprint
