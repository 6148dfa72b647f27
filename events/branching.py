"""A branch of a run (issue 39, `agentledger branch`): a new run whose turns before
`spec.branch.turn` are its origin's — each model request of those turns is answered
with the origin's recorded reply, and each call of those turns ends with the origin's
recorded outcome, so no side effect of the origin runs again and no person is asked
again to approve what the origin already did. From the branch's turn on it is a run
like any other, with its own model, tools and policies. Pure: the origin's events
are read by the shell."""

from __future__ import annotations

from collections.abc import Iterable

from agentledger.events.call_events import ToolCallFailed, ToolCallSucceeded
from agentledger.events.event_model import ToolError
from agentledger.events.tool_step import Errored, Succeeded
from agentledger.schemas.spec import ModelSpec, ReplayModel, ReplaySettings, RunSpec


def taken_from_origin(spec: RunSpec, turn: int) -> bool:
    """Whether this turn of the run is its origin's (a branch's turn before its own)."""
    return spec.branch is not None and turn < spec.branch.turn


def model_at(spec: RunSpec, turn: int) -> ModelSpec:
    """The model that answers `turn`: the origin's recorded replies before the branch's
    turn, the spec's own model from it."""
    if spec.branch is None or not taken_from_origin(spec, turn):
        return spec.model
    origin = ReplaySettings(run_id=spec.branch.run_id, fallback_model=spec.model.fallback_model)
    return ReplayModel(replay=origin)


def recorded_outcome(origin: Iterable[object], origin_id: str, call_id: str) -> Succeeded | Errored:
    """The outcome the origin recorded for `call_id` (its last), as this run's: marked
    as done before (`replay_of`), never run again."""
    found: ToolCallSucceeded | ToolCallFailed | None = None
    for e in origin:
        if isinstance(e, ToolCallSucceeded | ToolCallFailed) and e.call_id == call_id:
            found = e
    if isinstance(found, ToolCallSucceeded):
        return Succeeded(found.output, replay_of=f"{origin_id}/{call_id}")
    if isinstance(found, ToolCallFailed):
        return Errored(found.error)
    message = f"the origin {origin_id!r} recorded no outcome for call {call_id!r}"
    return Errored(ToolError(code="internal", message=message, retryable=False))
