"""Envelopes for the store contract and the store tests: seq 1 is a RunCreated,
later ones ModelRequested."""

from __future__ import annotations

import uuid
from typing import Any

from agentledger.events.types import Event, ModelRequested, RunCreated
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
