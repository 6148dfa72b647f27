"""Envelopes for the store contract and the store tests: seq 1 is a RunCreated,
later ones ModelRequested."""

from __future__ import annotations

import uuid
from typing import Any

from agentledger.events.types import (
    Event,
    ModelRequested,
    RunCancelled,
    RunCancelRequested,
    RunCreated,
)
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec

T0 = 1_700_000_000.0
CONTRACT_SPEC = RunSpec.model_validate(
    {
        "task": "contract",
        "principal": {"id": "alice", "tenant": "acme"},
        "model": {"scripted": [{"end_turn": "done"}]},
    }
)


def envelope(run_id: str, seq: int, event: Event, *, at: float = T0) -> Envelope[Any]:
    return Envelope[Any](
        id=uuid.uuid4().hex,
        run_id=run_id,
        seq=seq,
        type=event.type,
        at=at,
        source="contract",
        causation_id=None if seq == 1 else f"cause-{seq}",
        data=event,
    )


def batch(run_id: str, first_seq: int, n: int, *, at: float = T0) -> list[Envelope[Any]]:
    """`n` events from `first_seq` on; seq 1 is the RunCreated."""
    return [
        envelope(
            run_id,
            seq,
            RunCreated(spec=CONTRACT_SPEC, request_id="req")
            if seq == 1
            else ModelRequested(turn=1, attempt=seq - 1, deadline_at=at + 30),
            at=at + seq / 1000,
        )
        for seq in range(first_seq, first_seq + n)
    ]


def finished(run_id: str, *, at: float = T0, turns: int = 1) -> list[Envelope[Any]]:
    """A run that is over: created, `turns` model requests, a cancel asked for and
    done (status cancelled, nothing in flight)."""
    events = batch(run_id, 1, 1 + turns, at=at)
    n = len(events)
    end = at + (n + 2) / 1000
    events.append(envelope(run_id, n + 1, RunCancelRequested(by="ops", source="cli"), at=end))
    events.append(
        envelope(
            run_id,
            n + 2,
            RunCancelled(requested_at=end, by="ops", side_effects=(), detail="cancelled"),
            at=end,
        )
    )
    return events
