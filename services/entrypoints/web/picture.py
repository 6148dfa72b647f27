"""A run's picture for the web view, as JSON-ready values: the waterfall
(`agentledger.events.waterfall`: bars on lanes, their segments, durations,
tokens and cost, the log entries each stands for) and the conversation turn by
turn (the model's blocks as it sent them, then each tool call's input and
result). Everything passes the run's redactor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from agentledger.events.state import RunState, Turn
from agentledger.events.status import CallStatus
from agentledger.events.waterfall import Waterfall, waterfall
from agentledger.schemas.envelope import Envelope
from agentledger.services.secrets import redactor_for


def picture(state: RunState, envelopes: Sequence[Envelope[Any]]) -> dict[str, Any]:
    """`envelopes` is the run's whole log; `state` its fold."""
    found = waterfall(envelopes)
    shown = {
        "waterfall": _waterfall(found) if found is not None else None,
        "task": state.spec.task,
        "turns": [_turn(t) for t in state.turns],
    }
    return dict(redactor_for(state.spec).value(shown))


def _waterfall(w: Waterfall) -> dict[str, Any]:
    bars = [asdict(b) | {"kind": str(b.kind), "duration_s": b.duration_s} for b in w.bars]
    return {
        "start": w.start, "end": w.end, "lanes": list(w.lanes), "bars": bars,
        "marks": [asdict(m) for m in w.marks], "cost_usd": w.cost_usd,
    }  # fmt: skip


def _turn(t: Turn) -> dict[str, Any]:
    return {
        "turn": t.index,
        "model": t.model,
        "stop_reason": t.stop_reason,
        "content": [b.model_dump(mode="json") for b in t.content],
        "calls": [
            {
                "call_id": c.call_id,
                "name": c.name,
                "input": c.input,
                "status": str(c.status),
                "output": c.output if c.status is CallStatus.SUCCEEDED else None,
                "error": c.error.message if c.error else None,
            }
            for c in t.calls
        ],  # fmt: skip
        "feedback": t.feedback,
    }
