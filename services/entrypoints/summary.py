"""A run in a few fields, as `status`, `runs`, `run --json` and the web view show
it: times as ISO 8601 UTC, its duration so far, usage, cost and calls."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from agentledger.events.state import RunState
from agentledger.events.status import RunStatus


def iso(at: float | None) -> str | None:
    """An event time as ISO 8601 UTC, to the millisecond."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_summary(state: RunState, *, now: float | None = None) -> dict[str, Any]:
    """`duration_s`: to its end, or to `now` (this host's clock) while it is live."""
    calls = [c for t in state.turns for c in t.calls]
    ended = state.updated_at if state.status.terminal else None
    until = (
        ended if ended is not None else max(state.updated_at, time.time() if now is None else now)
    )
    return {
        "run_id": state.run_id,
        "status": str(state.status),
        "detail": state.detail,
        "task": state.spec.task,
        "principal": state.spec.principal.id,
        "publisher": state.publisher,
        # the escalation a reply, resume or abort must name while the run awaits a human
        "escalation": state.escalation if state.status is RunStatus.AWAITING_HUMAN else None,
        "created_at": iso(state.created_at),
        "updated_at": iso(state.updated_at),
        "ended_at": iso(ended),
        "duration_s": round(until - state.created_at, 3),
        "turns": state.turns_used,
        "usage": state.usage.model_dump(),
        "cost_usd": round(state.cost_usd, 6),
        "tool_calls": [
            {"call_id": c.call_id, "name": c.name, "status": str(c.status)} for c in calls
        ],
    }
