"""What `agentledger.services.handlers.checks.run_check` needs outside the workers: a run's
state (folded from its `RunCreated`, working in `workspace`) and an app with the
settings, a clock and a store (the memory twin: nobody cancels these runs)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from agentledger.events.fold import apply
from agentledger.events.state import RunState
from agentledger.events.types import RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.store.memory import MemoryEventStore
from agentledger.services.adapters.tools.sandbox import policy_for
from agentledger.services.clock import SystemClock
from agentledger.services.settings import Settings

SPEC = RunSpec.model_validate({
    "task": "a check run by the test itself",
    "principal": {"id": "alice", "tenant": "shop-1", "scopes": []},
    "model": {"scripted": [{"end_turn": "done"}]},
})  # fmt: skip


def check_state(workspace: str | None, run_id: str = "check-run") -> RunState:
    created = RunCreated(spec=SPEC, workspace=workspace)
    env: Envelope[Any] = Envelope(
        id="e-1", run_id=run_id, seq=1, type=created.type, at=time.time(), source="test",
        data=created,
    )  # fmt: skip
    state = apply(None, env)
    assert state is not None
    return state


def check_app(settings: Settings | None = None) -> Any:
    """What a command check reads of the worker's App: its settings, the sandbox they
    describe (made once per App), a clock and a store."""
    settings = settings or Settings()
    return SimpleNamespace(
        settings=settings, sandbox=policy_for(settings), clock=SystemClock(),
        store=MemoryEventStore(),
    )  # fmt: skip
