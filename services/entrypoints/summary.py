"""A run in a few fields, as `status`, `runs`, `run --json` and the web view show
it: times as ISO 8601 UTC, its duration so far, usage, cost and calls."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from agentledger.events.limits import slot_key
from agentledger.events.lock_step import call_keys
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus


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
            {"call_id": c.call_id, "name": c.name, "status": str(c.status)}
            | ({"waits": waits(c)} if c.status is CallStatus.WAITING else {})
            for c in calls
        ],
    }


def waits(c: Call) -> dict[str, Any]:
    """What a waiting call waits for: its locks and concurrency keys, each key's holders
    when it began waiting, and the end of a service's back-off that closed a key."""
    return {
        "for": sorted(call_keys(c)),
        "holders": dict(c.slot_holders),  # by slot key
        "limits": {slot_key(k): m for k, m in c.limits},
        "backed_off_until": iso(c.backed_off_until),
    }


def waits_line(w: dict[str, Any]) -> str:
    """`waits for limit:svc:pay (10 of 10 holding), file:x; backed off until …`."""

    def one(key: str) -> str:
        if key in w["holders"]:
            return f"{key} ({w['holders'][key]} of {w['limits'][key]} holding)"
        return key

    until = f"; backed off until {w['backed_off_until']}" if w["backed_off_until"] else ""
    return f"waits for {', '.join(one(k) for k in w['for'])}{until}"
