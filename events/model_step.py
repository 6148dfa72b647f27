"""Decisions of the model worker: claim the turn's model call, record its reply.

Each returns the events to append, `[]` when the step is not due (already done,
claimed by a live worker, or the run moved on): idempotency by construction."""

from __future__ import annotations

from collections.abc import Sequence

from events.budgets import exhausted_before_model_request
from events.state import RunState
from events.status import RunStatus
from events.types import (
    Event,
    ModelRequested,
    ModelResponded,
    RunFailed,
    StopReason,
    ToolCallProposed,
)
from schemas.content import ContentBlock, ToolUseBlock, Usage


def request_model(s: RunState, *, now: float, lease_s: float) -> list[Event]:
    if s.status is not RunStatus.REQUESTING_MODEL:
        return []
    if s.model_claim_deadline is not None and now < s.model_claim_deadline:
        return []  # another worker holds a live claim on this turn's call
    if (exhausted := exhausted_before_model_request(s)) is not None:
        return [exhausted]
    return [
        ModelRequested(
            turn=s.turns_used + 1, attempt=s.model_attempts + 1, deadline_at=now + lease_s
        )
    ]


def record_model_reply(
    s: RunState,
    *,
    turn: int,
    attempt: int,
    content: Sequence[ContentBlock],
    stop_reason: StopReason,
    usage: Usage,
    model: str,
) -> list[Event]:
    if not _holds_claim(s, turn, attempt):
        return []  # a late reply: the turn was answered or re-claimed meanwhile
    responded = ModelResponded(
        turn=turn, content=tuple(content), stop_reason=stop_reason, usage=usage, model=model
    )
    uses = [b for b in content if isinstance(b, ToolUseBlock)]
    if stop_reason == "tool_use":
        problem = _tool_use_problem(uses)
        if problem:
            return [responded, RunFailed(reason="model_protocol", detail=problem)]
        return [
            responded,
            *(ToolCallProposed(call_id=u.id, turn=turn, name=u.name, input=u.input) for u in uses),
        ]
    if stop_reason in ("end_turn", "stop_sequence"):
        return [responded]
    return [responded, RunFailed(reason=f"model_{stop_reason}", detail=_stopped(stop_reason))]


def record_model_error(s: RunState, *, turn: int, attempt: int, message: str) -> list[Event]:
    """A model error that retrying will not fix ends the run, with the API's words."""
    if not _holds_claim(s, turn, attempt):
        return []
    return [RunFailed(reason="model_error", detail=message)]


def _holds_claim(s: RunState, turn: int, attempt: int) -> bool:
    return (
        s.status is RunStatus.REQUESTING_MODEL
        and s.turns_used + 1 == turn
        and s.model_attempts == attempt
    )


def _tool_use_problem(uses: list[ToolUseBlock]) -> str | None:
    if not uses:
        return "stop_reason tool_use without any tool_use block"
    ids = [u.id for u in uses]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    return f"duplicate tool_use ids {dupes}" if dupes else None


def _stopped(stop_reason: str) -> str:
    return f"the model stopped with {stop_reason!r}, which this run does not continue from"
