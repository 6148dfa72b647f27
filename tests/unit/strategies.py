"""Hypothesis strategies for the property tests: any event with plausible fields
(a few call ids, turns and attempts, so random events often hit a real call),
and `decision`, which draws one step a worker, the sweeper or a person could
take on a state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from hypothesis import strategies as st
from runlog import LEASE_S, T0, TOOLS, check, make_spec, text, use

from agentledger.events import controls
from agentledger.events.acceptance_step import record_acceptance, start_acceptance
from agentledger.events.errors import ControlRefused
from agentledger.events.model_retry import ModelFailure, RetryBound
from agentledger.events.model_step import record_model_error, record_model_reply, request_model
from agentledger.events.state import RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.ticks import on_tick
from agentledger.events.tool_step import (
    Errored,
    Outcome,
    StillRunning,
    Stopped,
    Succeeded,
    TimedOut,
    claim_call,
    record_outcome,
)
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ErrorCode,
    Event,
    FieldError,
    HumanReplied,
    ModelErrorKind,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunAborted,
    RunBudgetExhausted,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunEscalated,
    RunFailed,
    RunResumed,
    RunTimedOut,
    StopReason,
    ToolCallCancelled,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolError,
)
from agentledger.events.validation_step import Finding, validate_call
from agentledger.schemas.content import ContentBlock, Usage

R = RunStatus
# Budgets small enough that each can fire within a generated run.
SPEC = make_spec(
    max_turns=4,
    budgets={
        "max_output_tokens": 120,
        "max_input_tokens": 2_000,
        "max_cost_usd": 0.5,
        "prices": {"m": {"input": 100.0, "output": 1_000.0}},
        "max_wall_clock_s": 1_500,
        "max_consecutive_failures": 4,
        "repeat_limit": 2,
    },
    policies={"approval_timeout_s": 200},
)
CALL_IDS = ("a", "b", "c")
TOOL_NAMES = (*sorted(TOOLS), "no_such_tool")

call_ids = st.sampled_from(CALL_IDS)
turns = st.integers(1, 4)
attempts = st.integers(1, 4)
times = st.floats(T0, T0 + 300, allow_nan=False)
words = st.sampled_from(["", "x", "done"])
people = st.sampled_from(["bob", "dana"])
# msgpack holds 64-bit integers only; larger ones are refused (test_codec.py).
msgpack_ints = st.integers(-(2**63), 2**64 - 1)
errors = st.builds(
    ToolError, code=st.sampled_from(get_args(ErrorCode)), message=words, retryable=st.booleans()
)
model_failures = st.builds(
    ModelFailure,
    kind=st.sampled_from(get_args(ModelErrorKind)),
    cause=words,
    retry_after_s=st.sampled_from([None, 0.5, 400.0]),
)
# three attempts a turn, within a minute: a run of drawn decisions meets both ends
RETRY_BOUND = RetryBound(max_attempts=3, retry_s=60.0)
usages = st.builds(Usage, input_tokens=st.integers(0, 300), output_tokens=st.integers(0, 40))
tool_uses = st.lists(
    st.builds(use, call_ids, st.sampled_from(TOOL_NAMES), path=st.sampled_from(["x", "y"])),
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
        else st.sampled_from(get_args(StopReason)).flatmap(
            lambda stop: st.sampled_from(
                # a refusal never carries a tool_use here: its call would be left unanswered
                [(text("hm"),)] if stop == "refusal" else [(text("hm"),), (text("hm"), use("a"))]
            ).map(lambda content: (content, stop))
        )
    )
)
_contract: dict[str, Any] = {"read_only": st.booleans(), "timeout_s": st.just(5.0)}

random_events: st.SearchStrategy[Event] = st.one_of(
    st.builds(RunCreated, spec=st.just(SPEC)),
    st.builds(ModelRequested, turn=turns, attempt=attempts, deadline_at=times),
    st.builds(
        ModelRequestFailed,
        turn=turns,
        attempt=attempts,
        kind=st.sampled_from(get_args(ModelErrorKind)),
        cause=words,
        retry_at=st.one_of(st.none(), times),
    ),
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
    st.builds(ToolCallValidated, call_id=call_ids, **_contract),
    st.builds(ApprovalRequested, call_id=call_ids, expires_at=times, reason=words, **_contract),
    st.builds(ApprovalGranted, call_id=call_ids, by=people, note=words),
    st.builds(ApprovalDenied, call_id=call_ids, by=people, expired=st.booleans()),
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
    st.builds(ToolCallCancelled, call_id=call_ids, requested_at=times, stopped_at=times),
    st.builds(
        ToolCallForceTerminated,
        call_id=call_ids,
        requested_at=times,
        terminated_at=times,
        detail=words,
    ),
    st.builds(AcceptanceStarted, attempt=attempts, deadline_at=times),
    st.builds(
        AcceptanceChecked,
        index=st.integers(0, 3),
        check=words,
        passed=st.booleans(),
        evidence=st.just({}),
        started_at=st.one_of(st.none(), times),
        checked_at=times,
        depends_on=st.sampled_from([(), ("*",), ("file:x",)]),
    ),
    st.builds(
        AcceptanceCheckStopped,
        attempt=attempts,
        index=st.integers(0, 3),
        check=words,
        requested_at=times,
        stopped_at=times,
        signals=st.sampled_from([("SIGTERM",), ("SIGTERM", "SIGKILL")]),
        detail=words,
    ),
    st.builds(AcceptanceFailed, feedback=words),
    st.builds(RunCompleted, detail=words),
    st.builds(RunFailed, reason=words, detail=words),
    st.builds(
        RunBudgetExhausted,
        budget=st.sampled_from(["turns", "input_tokens", "output_tokens", "cost"]),
        used=st.integers(0, 4),
        limit=st.integers(1, 4),
        detail=words,
    ),
    st.builds(
        RunEscalated,
        reason=st.sampled_from(["repeated_failure", "refusal", "outcome_unknown"]),
        detail=words,
    ),
    st.builds(RunTimedOut, limit_s=st.just(60.0), elapsed_s=st.just(61.0), detail=words),
    st.builds(RunCancelRequested, by=people, source=st.sampled_from(["cli", "inbox"])),
    st.builds(RunCancelled, requested_at=times, by=people, side_effects=st.just(()), detail=words),
    st.builds(HumanReplied, by=people, text=st.sampled_from(["go on", "try y"])),
    st.builds(RunResumed, by=people),
    st.builds(RunAborted, by=people),
)

running_outcomes = st.one_of(
    st.builds(Succeeded, output=words),
    st.builds(Errored, error=errors),
    st.builds(TimedOut, after_s=st.just(5.0)),
)
DECISIONS = (
    "request_model",
    "reply",
    "validate",
    "claim",
    "outcome",
    "tick",
    "start_acceptance",
    "record_acceptance",
    "approve",
    "deny",
    "human_reply",
    "resume",
)
# Mostly the decisions due in the run's status, so runs get deep; the ones that
# end a run (a model error, an abort, a cancel) are rare.
DUE = {
    R.REQUESTING_MODEL: ("request_model", "reply") * 5 + ("model_error",),
    R.VALIDATING: ("validate",),
    R.RUNNING_TOOLS: ("claim", "claim", "outcome", "outcome", "tick"),
    R.ACCEPTING: ("start_acceptance", "record_acceptance"),
    R.AWAITING_APPROVAL: ("approve", "approve", "deny", "tick"),
    R.AWAITING_HUMAN: ("human_reply", "resume", "outcome") * 2 + ("abort",),
    R.CANCELLING: ("outcome", "outcome", "tick"),
}
ENDED = ("outcome", "reply")  # what a run that ended may still record
CANCEL_PERCENT = 2

Decision = Callable[[RunState], list[Event]]


def refusable(control: Decision) -> Decision:
    """A control that does not fit the run appends nothing."""

    def decide(s: RunState) -> list[Event]:
        try:
            return control(s)
        except ControlRefused:
            return []

    return decide


def stop_outcomes(s: RunState) -> st.SearchStrategy[Outcome]:
    # A tool is asked to stop only once its run is cancelling or over (as
    # services/handlers/execution.RunWatch does), at the time the log says.
    requested = s.cancel_requested_at or s.updated_at
    return st.one_of(
        running_outcomes,
        st.builds(Stopped, requested_at=st.just(requested), killed=st.booleans()),
        st.just(StillRunning(requested_at=requested)),
    )


def decision(data: st.DataObject, state: RunState, now: float) -> Decision:
    """One decision a worker, the sweeper or a person could make on `state` at
    `now`, its findings drawn; a function of the state, so a test can repeat it
    on the state after."""
    due = ENDED if state.status.terminal else DUE.get(state.status, ())
    kind = data.draw(st.sampled_from((*due, "any")), label="decision")
    if kind == "any":
        kind = data.draw(st.sampled_from(DECISIONS), label="any decision")
    # (hypothesis favours the ends of a range, so the rare value sits in its middle)
    if data.draw(st.integers(0, 99), label="cancel?") in range(40, 40 + CANCEL_PERCENT):
        kind = "cancel"
    calls = [c.call_id for c in state.current_turn.calls] if state.current_turn else []
    call_id = data.draw(st.sampled_from(calls), label="call") if calls else "a"
    call = state.call(call_id)
    turn, attempt = state.turns_used + 1, state.model_attempts
    match kind:
        case "request_model":
            return lambda s: request_model(s, now=now, lease_s=LEASE_S, bound=RETRY_BOUND)
        case "reply":
            content, stop = data.draw(replies, label="reply")
            usage = data.draw(usages, label="usage")
            reply = dict(content=content, stop_reason=stop, usage=usage, model="m")
            return lambda s: record_model_reply(s, turn=turn, attempt=attempt, **reply)  # type: ignore[arg-type]
        case "model_error":
            failure = data.draw(model_failures, label="model failure")
            return lambda s: record_model_error(
                s, turn=turn, attempt=attempt, failure=failure, now=now, bound=RETRY_BOUND
            )
        case "validate":
            bad = data.draw(st.sampled_from([()] * 4 + [(FieldError(loc="path", msg="required"),)]))
            ask = data.draw(st.sampled_from([None] * 3 + ["writes need a person"]), label="ask")
            tool = TOOLS.get(call.name) if call else None
            found = Finding(tool=tool, field_errors=bad, approval=ask)
            return lambda s: validate_call(
                s, call_id, found=found, known_tools=sorted(TOOLS), now=now
            )
        case "claim":
            return lambda s: claim_call(s, call_id, worker="w", now=now)
        case "outcome":
            stopping = state.status is R.CANCELLING or state.status.terminal
            outcome = data.draw(stop_outcomes(state) if stopping else running_outcomes)
            tried = call.attempts if call else 1
            return lambda s: record_outcome(
                s, call_id, attempt=tried, outcome=outcome, started_at=now, finished_at=now
            )
        case "tick":
            return lambda s: on_tick(s, now=now)
        case "start_acceptance":
            return lambda s: start_acceptance(s, now=now, lease_s=LEASE_S)
        case "record_acceptance":
            passes = data.draw(st.lists(st.booleans(), max_size=2), label="checks")
            began = data.draw(st.sampled_from([now, now - 200]), label="check began")
            results = [check(p, started_at=began) for p in passes]
            tried = state.acceptance_attempts
            return lambda s: record_acceptance(s, attempt=tried, results=results)
        case "approve" | "deny":
            # a person answers a request the run shows as waiting (a control in any
            # other state is refused: test_controls)
            if state.status is not R.AWAITING_APPROVAL or call is None:
                return lambda s: []
            if call.status is not CallStatus.AWAITING_APPROVAL:
                return refusable(lambda s: controls.approve(s, call_id, by="bob"))
            answer = controls.approve if kind == "approve" else controls.deny
            return refusable(lambda s: answer(s, call_id, by="bob", note="ok"))
        case "cancel":
            return refusable(lambda s: controls.cancel(s, by="carol", source="cli"))
        case "human_reply":
            return refusable(
                lambda s: controls.reply(s, by="dana", escalation=s.escalation or 0, text="try y")
            )
        case "resume":
            return refusable(lambda s: controls.resume(s, by="dana", escalation=s.escalation or 0))
        case _:
            return refusable(lambda s: controls.abort(s, by="dana", escalation=s.escalation or 0))
