"""Decisions of the model worker: claim the turn's model call, record its reply.

Each returns the events to append, `[]` when the step is not due (already done,
claimed by a live worker, or the run moved on): idempotency by construction.
Every stop reason is handled distinctly:

    tool_use                      -> validate and run the calls
    end_turn, stop_sequence       -> acceptance (never straight to completed)
    max_tokens                    -> calls in the reply are recorded and never run;
                                     go on (policies.on_max_tokens=continue) or fail
    pause_turn                    -> ask again with the reply as it is
    refusal                       -> a human (policies.on_refusal=escalate) or fail
    model_context_window_exceeded -> fail"""

from __future__ import annotations

from collections.abc import Sequence

from events.budgets import exceeded_before_model_request
from events.state import RunState
from events.status import RunStatus
from events.types import (
    Event,
    ModelRequested,
    ModelResponded,
    RunEscalated,
    RunFailed,
    StopReason,
    ToolCallProposed,
    ToolCallRejected,
    ToolError,
)
from schemas.content import ContentBlock, ToolUseBlock, Usage

# a reply that arrives while or after the run is cancelled is recorded, not acted on
_RECORD_ONLY = frozenset({RunStatus.CANCELLING, RunStatus.CANCELLED})


def request_model(s: RunState, *, now: float, lease_s: float) -> list[Event]:
    if s.status is not RunStatus.REQUESTING_MODEL:
        return []
    if s.model_claim_deadline is not None and now < s.model_claim_deadline:
        return []  # another worker holds a live claim on this turn's call
    if (ended := exceeded_before_model_request(s, now=now)) is not None:
        return [ended]
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
    truncated: Sequence[str] = (),
    retries: Sequence[str] = (),
) -> list[Event]:
    if not _holds_claim(s, turn, attempt):
        return []  # a late reply: the turn was answered or re-claimed meanwhile
    responded = ModelResponded(
        turn=turn,
        content=tuple(content),
        stop_reason=stop_reason,
        usage=usage,
        model=model,
        retries=tuple(retries),
    )
    if s.status in _RECORD_ONLY:
        return [responded]
    uses = [b for b in content if isinstance(b, ToolUseBlock)]
    if problem := _tool_use_problem(stop_reason, uses):
        return [responded, RunFailed(reason="model_protocol", detail=problem)]
    return [responded, *_next(s, turn, stop_reason, uses, set(truncated))]


def _next(
    s: RunState, turn: int, stop_reason: StopReason, uses: list[ToolUseBlock], truncated: set[str]
) -> list[Event]:
    policies = s.spec.policies
    proposed = [ToolCallProposed(call_id=u.id, turn=turn, name=u.name, input=u.input) for u in uses]
    match stop_reason:
        case "tool_use" | "end_turn" | "stop_sequence" | "pause_turn":
            return list(proposed)
        case "max_tokens" if policies.on_max_tokens == "continue":
            return [*proposed, *(_cut_off(u.id, u.id in truncated) for u in uses)]
        case "refusal" if policies.on_refusal == "escalate":
            # every tool_use is answered, so the run can go on after a person's word
            unanswered = [_not_run(u.id, "the reply was a refusal") for u in uses]
            escalate = RunEscalated(reason="refusal", detail=f"the model refused at turn {turn}")
            return [*proposed, *unanswered, escalate]
    return [RunFailed(reason=f"model_{stop_reason}", detail=_stopped(stop_reason, turn))]


def record_model_error(s: RunState, *, turn: int, attempt: int, message: str) -> list[Event]:
    """A model error that retrying will not fix ends the run, with the API's words."""
    if not _holds_claim(s, turn, attempt) or s.status in _RECORD_ONLY:
        return []
    return [RunFailed(reason="model_error", detail=message)]


def _holds_claim(s: RunState, turn: int, attempt: int) -> bool:
    claimable = s.status is RunStatus.REQUESTING_MODEL or s.status in _RECORD_ONLY
    return claimable and s.turns_used + 1 == turn and s.model_attempts == attempt


def _tool_use_problem(stop_reason: StopReason, uses: list[ToolUseBlock]) -> str | None:
    if stop_reason == "tool_use" and not uses:
        return "stop_reason tool_use without any tool_use block"
    ids = [u.id for u in uses]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    return f"duplicate tool_use ids {dupes}" if dupes else None


def _not_run(call_id: str, why: str) -> ToolCallRejected:
    error = ToolError(code="invalid_arguments", message=f"not executed: {why}", retryable=False)
    return ToolCallRejected(call_id=call_id, error=error)


def _cut_off(call_id: str, truncated: bool) -> ToolCallRejected:
    why = "its input was cut off" if truncated else "the reply it came in was cut off"
    message = f"not executed: {why} by max_tokens; send the call again in full"
    return ToolCallRejected(
        call_id=call_id, error=ToolError(code="invalid_arguments", message=message, retryable=True)
    )


def _stopped(stop_reason: str, turn: int) -> str:
    return (
        f"the model stopped with {stop_reason!r} at turn {turn}; this run does not go on from that"
    )
