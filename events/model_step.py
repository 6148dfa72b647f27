"""Decisions of the model worker: claim the turn's model call, record its reply.

Each returns the events to append, `[]` when the step is not due (already done,
claimed by a live worker, or the run moved on): idempotency by construction.
Every stop reason is handled distinctly, as `agentledger.events.stop_reasons` says.

A failed request (no reply) is recorded with its cause and asked again within
the operator's bound, or ends the run: `agentledger.events.model_retry`.

Server tool uses (web search, web fetch, code execution) are the provider's:
they stay in the reply's content and are never proposed to our executor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, assert_never

from agentledger.events.budgets import RequestEstimate, exceeded_before_model_request
from agentledger.events.claims import Window, expired
from agentledger.events.model_retry import ModelFailure, RetryBound, after_failure, out_of_attempts
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.stop_reasons import AfterStop, after_stop
from agentledger.events.types import (
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
from agentledger.schemas.content import ContentBlock, ProviderBlock, ToolUseBlock, Usage

NO_RETRY = RetryBound(max_attempts=1)  # a failed request ends the run
# a reply that arrives while or after the run is cancelled is recorded, not acted on
_RECORD_ONLY = frozenset({RunStatus.CANCELLING, RunStatus.CANCELLED})


def model_request_due(s: RunState, *, now: float, unreachable: Sequence[Window] = ()) -> bool:
    """Whether the turn's model call may be claimed now: no live claim of another
    worker holds it, nor the wait after a failed attempt (`agentledger.events.claims`)."""
    if s.status is not RunStatus.REQUESTING_MODEL:
        return False
    return expired(s.model_claim_deadline, now=now, unreachable=unreachable)


def request_model(
    s: RunState,
    *,
    now: float,
    lease_s: float,
    estimate: RequestEstimate | None = None,
    bound: RetryBound | None = None,
) -> list[Event]:
    """Claim the turn's model call; `estimate` is the size of the request that
    would be sent (the context view's), checked against the budgets first; with
    `bound`, a turn whose attempts are used up fails instead (`agentledger.events.model_retry`)."""
    if not model_request_due(s, now=now):
        return []
    if (ended := exceeded_before_model_request(s, now=now, estimate=estimate)) is not None:
        return [ended]
    if bound is not None and (spent := out_of_attempts(s, bound)) is not None:
        return [spent]
    return [
        ModelRequested(
            turn=s.turns_used + 1,
            attempt=s.model_attempts + 1,
            deadline_at=now + lease_s,
            model=requested_model(s),
        )
    ]


def requested_model(s: RunState) -> str | None:
    """The model the next request goes to: the spec's, or its fallback once a turn
    was refused (thinking blocks are tied to the model, so it stays)."""
    model = s.spec.model
    if not model.names_model:
        return None
    fallback = model.fallback_model
    if fallback is not None and any(t.stop_reason == "refusal" for t in s.turns):
        return fallback
    return model.model_id


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
    stop_sequence: str | None = None,
    stop_details: Mapping[str, Any] | None = None,
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
        stop_sequence=stop_sequence,
        stop_details=dict(stop_details) if stop_details is not None else None,
        truncated=tuple(truncated),
    )
    if s.status in _RECORD_ONLY:
        return [responded]
    uses = [b for b in content if isinstance(b, ToolUseBlock)]
    if problem := _tool_use_problem(stop_reason, uses, content):
        return [responded, RunFailed(reason="model_protocol", detail=problem)]
    return [responded, *_next(s, responded, uses, set(truncated))]


def _next(
    s: RunState, reply: ModelResponded, uses: list[ToolUseBlock], truncated: set[str]
) -> list[Event]:
    policies, turn, stop_reason = s.spec.policies, reply.turn, reply.stop_reason
    proposed = [ToolCallProposed(call_id=u.id, turn=turn, name=u.name, input=u.input) for u in uses]
    match after_stop(stop_reason):
        case AfterStop.RUN_CALLS | AfterStop.ACCEPT | AfterStop.ASK_AGAIN:
            return list(proposed)
        case AfterStop.CUT_OFF:
            if policies.on_max_tokens == "continue":
                return [*proposed, *(_cut_off(u.id, u.id in truncated) for u in uses)]
        case AfterStop.REFUSED:
            if _may_fall_back(s) or policies.on_refusal == "escalate":
                # every tool_use is answered, so the run can go on without the refused turn
                unanswered = [_not_run(u.id, "the reply was a refusal") for u in uses]
                if _may_fall_back(s):
                    return [*proposed, *unanswered]  # the next request goes to the fallback model
                detail = f"the model refused at turn {turn}{refusal_details(reply.stop_details)}"
                return [*proposed, *unanswered, RunEscalated(reason="refusal", detail=detail)]
        case AfterStop.FAIL:
            pass
        case unhandled:
            assert_never(unhandled)
    return [RunFailed(reason=f"model_{stop_reason}", detail=_stopped(reply))]


def _may_fall_back(s: RunState) -> bool:
    """A fallback model is named and no turn before this one was refused."""
    if s.spec.model.fallback_model is None:
        return False
    return not any(t.stop_reason == "refusal" for t in s.turns)


def refusal_details(details: Mapping[str, Any] | None) -> str:
    """` (category 'cyber': the API's explanation)`, or nothing when it gave none."""
    if not details:
        return ""
    category, explanation = details.get("category"), details.get("explanation")
    said = [f"category {category!r}" if category else "", str(explanation or "")]
    text = ": ".join(p for p in said if p)
    return f" ({text})" if text else ""


def record_model_error(
    s: RunState,
    *,
    turn: int,
    attempt: int,
    failure: ModelFailure,
    now: float,
    bound: RetryBound = NO_RETRY,
) -> list[Event]:
    """A failed model request is recorded with its cause; the turn is asked again
    after a wait, or the run fails (`agentledger.events.model_retry` decides which)."""
    if attempt < 1 or not _holds_claim(s, turn, attempt) or s.status in _RECORD_ONLY:
        return []  # never claimed, a late failure, or the run is being cancelled
    return after_failure(s, failure, turn=turn, attempt=attempt, now=now, bound=bound)


def _holds_claim(s: RunState, turn: int, attempt: int) -> bool:
    claimable = s.status is RunStatus.REQUESTING_MODEL or s.status in _RECORD_ONLY
    failed = s.model_failed_attempt == attempt  # its failure is recorded: the claim is over
    return claimable and s.turns_used + 1 == turn and s.model_attempts == attempt and not failed


def _tool_use_problem(
    stop_reason: StopReason, uses: list[ToolUseBlock], content: Sequence[ContentBlock]
) -> str | None:
    if stop_reason == "tool_use" and not uses and not pending_server_tool_uses(content):
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


def pending_server_tool_uses(content: Sequence[ContentBlock]) -> list[str]:
    """Server tool uses in a reply with no result block yet: the provider completes
    them in a later response (we only send the content back)."""
    blocks = [b for b in content if isinstance(b, ProviderBlock)]
    answered = {b.tool_use_id for b in blocks if b.tool_use_id is not None}
    ids = [b.fields.get("id") for b in blocks if b.is_server_tool_use]
    return [i for i in ids if isinstance(i, str) and i not in answered]


def _stopped(reply: ModelResponded) -> str:
    return (
        f"the model stopped with {reply.stop_reason!r} at turn {reply.turn}"
        f"{refusal_details(reply.stop_details)}; this run does not go on from that"
    )
