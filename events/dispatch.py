"""Which commands are due for a run, from its folded state alone. The reactor
sends them on every feed entry and the sweeper re-sends them for idle runs;
both are safe to repeat because every handler re-checks before acting."""

from __future__ import annotations

from events.commands import (
    Command,
    ExecuteCall,
    RequestModel,
    ResolveCall,
    RunAcceptance,
    ScheduleCalls,
    ValidateCall,
)
from events.lock_step import lock_asks
from events.resolution_step import needs_resolution
from events.state import RunState
from events.status import CallStatus, RunStatus
from events.tool_step import runnable


def due_commands(s: RunState, *, now: float) -> list[Command]:
    match s.status:
        case RunStatus.REQUESTING_MODEL:
            if s.model_claim_deadline is None or now >= s.model_claim_deadline:
                return [RequestModel(s.run_id)]
        case RunStatus.VALIDATING:
            calls = s.current_turn.calls if s.current_turn else ()
            return [
                ValidateCall(s.run_id, c.call_id) for c in calls if c.status is CallStatus.PROPOSED
            ]
        case RunStatus.RUNNING_TOOLS:
            schedule: list[Command] = [ScheduleCalls(s.run_id)] if lock_asks(s) else []
            calls = s.current_turn.calls if s.current_turn else ()
            resolve = [
                ResolveCall(s.run_id, c.call_id) for c in calls if needs_resolution(c, now=now)
            ]
            return schedule + resolve + [ExecuteCall(s.run_id, c.call_id) for c in runnable(s)]
        case RunStatus.ACCEPTING:
            if s.acceptance_claim_deadline is None or now >= s.acceptance_claim_deadline:
                return [RunAcceptance(s.run_id)]
    return []
