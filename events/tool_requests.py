"""Decisions on what an MCP server asks our client during a call: whether the
run's model may answer a sampling request (the call still running, the run not
stopping, the budget — cost, input and output tokens — allowing the request as
asked, its `max_tokens` cut to what the run has left), recording the answer; and
asking a person a server's question (elicitation) as an escalation of the run,
which `reply`, `resume` or `abort` answers."""

from __future__ import annotations

from typing import Any

from agentledger.events.budgets import (
    RequestEstimate,
    exceeded_by_sampling,
    output_tokens_left,
    wall_clock_exceeded,
)
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import Event, RunEscalated

R = RunStatus
SAMPLING_STATUSES = frozenset({R.RUNNING_TOOLS, R.AWAITING_HUMAN})
ASKING_STATUSES = frozenset({R.RUNNING_TOOLS})
CHARS_PER_TOKEN = 4


def _running(s: RunState, call_id: str) -> bool:
    call = s.current_turn.call(call_id) if s.current_turn else None
    return call is not None and call.status is CallStatus.STARTED


def sampling_tokens(s: RunState, asked: int, most: int) -> int:
    """The `max_tokens` a sampling request is sent with: as asked, within the
    operator's `most` and the run's output tokens left."""
    left = output_tokens_left(s)
    return max(0, min(asked, most, left if left is not None else most))


def sampling_refusal(
    s: RunState, call_id: str, *, input_chars: int, max_tokens: int, now: float
) -> str | None:
    """Why the run's model may not answer a sampling request made during `call_id`."""
    if not _running(s, call_id):
        return f"call {call_id!r} of run {s.run_id!r} is not running"
    if s.status not in SAMPLING_STATUSES:
        return f"run {s.run_id!r} is {s.status}"
    if max_tokens < 1:
        used, limit = s.usage.output_tokens, s.spec.budgets.max_output_tokens
        return f"the run has no output tokens left ({used} of max_output_tokens {limit} used)"
    if (timed_out := wall_clock_exceeded(s, now=now)) is not None:
        return timed_out.detail
    tokens = -(-input_chars // CHARS_PER_TOKEN)
    over = exceeded_by_sampling(s, RequestEstimate(input_chars, tokens, max_tokens))
    return over.detail if over is not None else None


def record_sample(s: RunState, answer: ToolSampledModel) -> list[Event]:
    """The answer as the run's next sample ([] when its call is no longer running:
    it ended while the model answered, and its usage is then not the run's to
    record — the call's outcome is)."""
    if not _running(s, answer.call_id) or s.status not in (*SAMPLING_STATUSES, R.CANCELLING):
        return []
    return [answer.model_copy(update={"sample": s.samples + 1})]


def ask_human(
    s: RunState, call_id: str, detail: str, schema: dict[str, Any] | None = None
) -> list[Event]:
    """A server's question during `call_id`, put to a person (`schema`: the answer's
    JSON Schema): the run waits for one ([] when the call no longer runs, or the
    run already waits for a person)."""
    if not _running(s, call_id) or s.status not in ASKING_STATUSES:
        return []
    return [RunEscalated(reason="tool_question", detail=detail, question=schema)]
