"""Hypothesis strategies for the property tests: any event with plausible fields
(a few call ids, turns and attempts, so random events often hit a real call),
and `decision`, which draws one step a worker could take on a state."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from hypothesis import strategies as st
from runlog import LEASE_S, T0, TOOLS, check, make_spec, text, use

from events.acceptance_step import record_acceptance, start_acceptance
from events.model_step import record_model_error, record_model_reply, request_model
from events.state import RunState
from events.status import RunStatus
from events.tool_step import (
    Errored,
    Succeeded,
    TimedOut,
    claim_call,
    expire_claims,
    record_outcome,
    validate_call,
)
from events.types import (
    AcceptanceChecked,
    AcceptanceFailed,
    AcceptanceStarted,
    ErrorCode,
    Event,
    FieldError,
    ModelRequested,
    ModelResponded,
    RunBudgetExhausted,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    StopReason,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolError,
)
from schemas.content import ContentBlock, Usage

SPEC = make_spec(max_turns=4)
CALL_IDS = ("a", "b", "c")
TOOL_NAMES = (*sorted(TOOLS), "no_such_tool")

call_ids = st.sampled_from(CALL_IDS)
turns = st.integers(1, 4)
attempts = st.integers(1, 4)
times = st.floats(T0, T0 + 300, allow_nan=False)
words = st.sampled_from(["", "x", "done"])
# msgpack holds 64-bit integers only; larger ones are a known codec bug (test_codec.py).
msgpack_ints = st.integers(-(2**63), 2**64 - 1)
errors = st.builds(
    ToolError, code=st.sampled_from(get_args(ErrorCode)), message=words, retryable=st.booleans()
)
tool_uses = st.lists(
    st.builds(use, call_ids, st.sampled_from(TOOL_NAMES)),
    min_size=1,
    max_size=3,
    unique_by=lambda b: b.id,
).map(tuple)
_reply_kind = st.sampled_from(["tool_use"] * 6 + ["end_turn"] * 2 + ["other"])
replies: st.SearchStrategy[tuple[tuple[ContentBlock, ...], StopReason]] = _reply_kind.flatmap(
    lambda kind: (
        tool_uses.map(lambda uses: (uses, "tool_use"))
        if kind == "tool_use"
        else st.just(((text("done"),), "end_turn"))
        if kind == "end_turn"
        else st.sampled_from(get_args(StopReason)).map(lambda stop: ((text("hm"),), stop))
    )
)

random_events: st.SearchStrategy[Event] = st.one_of(
    st.builds(RunCreated, spec=st.just(SPEC)),
    st.builds(ModelRequested, turn=turns, attempt=attempts, deadline_at=times),
    st.builds(
        lambda turn, reply: ModelResponded(
            turn=turn, content=reply[0], stop_reason=reply[1], model="m"
        ),
        turns,
        replies,
    ),
    st.builds(
        ToolCallProposed,
        call_id=call_ids,
        turn=turns,
        name=st.sampled_from(TOOL_NAMES),
        input=st.just({}),
    ),
    st.builds(ToolCallValidated, call_id=call_ids, read_only=st.booleans(), timeout_s=st.just(5.0)),
    st.builds(ToolCallRejected, call_id=call_ids, error=errors),
    st.builds(ToolCallStarted, call_id=call_ids, attempt=attempts, worker=words, deadline_at=times),
    st.builds(
        ToolCallSucceeded,
        call_id=call_ids,
        output=st.one_of(st.none(), words, msgpack_ints),
        started_at=times,
        finished_at=times,
    ),
    st.builds(ToolCallFailed, call_id=call_ids, error=errors, finished_at=times),
    st.builds(ToolCallOutcomeUnknown, call_id=call_ids, reason=words),
    st.builds(AcceptanceStarted, attempt=attempts, deadline_at=times),
    st.builds(
        AcceptanceChecked,
        index=st.integers(0, 3),
        check=words,
        passed=st.booleans(),
        evidence=st.just({}),
        checked_at=times,
    ),
    st.builds(AcceptanceFailed, feedback=words),
    st.builds(RunCompleted, detail=words),
    st.builds(RunFailed, reason=words, detail=words),
    st.builds(
        RunBudgetExhausted,
        budget=st.just("turns"),
        used=st.integers(0, 4),
        limit=st.integers(1, 4),
        detail=words,
    ),
    st.builds(RunEscalated, reason=words, detail=words),
)

outcomes = st.one_of(
    st.builds(Succeeded, output=words),
    st.builds(Errored, error=errors),
    st.builds(TimedOut, after_s=st.just(5.0)),
)
DECISIONS = (
    "request_model",
    "reply",
    "model_error",
    "validate",
    "claim",
    "outcome",
    "expire",
    "start_acceptance",
    "record_acceptance",
)
# Mostly the decisions a worker would take in the run's status, so runs get deep;
# a model error ends the run, so it is rare.
DUE = {
    RunStatus.REQUESTING_MODEL: ("request_model", "reply") * 5 + ("model_error",),
    RunStatus.VALIDATING: ("validate",),
    RunStatus.RUNNING_TOOLS: ("claim", "claim", "outcome", "outcome", "expire"),
    RunStatus.ACCEPTING: ("start_acceptance", "record_acceptance"),
}


Decision = Callable[[RunState], list[Event]]


def decision(data: st.DataObject, state: RunState, now: float) -> Decision:
    """One decision a worker could make on `state` at `now`, its findings drawn; a
    function of the state, so a test can repeat it on the state after."""
    kind = data.draw(st.sampled_from((*DUE.get(state.status, ()), "any")), label="decision")
    if kind == "any":
        kind = data.draw(st.sampled_from(DECISIONS), label="any decision")
    calls = [c.call_id for c in state.current_turn.calls] if state.current_turn else []
    call_id = data.draw(st.sampled_from(calls), label="call") if calls else "a"
    call = state.call(call_id)
    turn, attempt = state.turns_used + 1, state.model_attempts
    match kind:
        case "request_model":
            return lambda s: request_model(s, now=now, lease_s=LEASE_S)
        case "reply":
            content, stop = data.draw(replies, label="reply")
            reply = dict(content=content, stop_reason=stop, usage=Usage(), model="m")
            return lambda s: record_model_reply(s, turn=turn, attempt=attempt, **reply)  # type: ignore[arg-type]
        case "model_error":
            return lambda s: record_model_error(s, turn=turn, attempt=attempt, message="overloaded")
        case "validate":
            bad = data.draw(st.sampled_from([(), (FieldError(loc="path", msg="required"),)]))
            tool = TOOLS.get(call.name) if call else None
            return lambda s: validate_call(
                s, call_id, tool=tool, known_tools=sorted(TOOLS), field_errors=bad
            )
        case "claim":
            return lambda s: claim_call(s, call_id, worker="w", now=now)
        case "outcome":
            outcome = data.draw(outcomes, label="outcome")
            tried = call.attempts if call else 1
            return lambda s: record_outcome(
                s, call_id, attempt=tried, outcome=outcome, started_at=now, finished_at=now
            )
        case "expire":
            return lambda s: expire_claims(s, now=now)
        case "start_acceptance":
            return lambda s: start_acceptance(s, now=now, lease_s=LEASE_S)
        case _:
            results = [check(p) for p in data.draw(st.lists(st.booleans(), max_size=2))]
            tried = state.acceptance_attempts
            return lambda s: record_acceptance(s, attempt=tried, results=results)
