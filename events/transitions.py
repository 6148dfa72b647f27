"""The two state machines as tables. Read them top to bottom like the lifecycle:

    requesting_model -> validating -> (awaiting_approval) -> running_tools -> requesting_model ...
    requesting_model -> accepting -> completed | requesting_model | failed
    any live state -> cancelling -> cancelled
    any live state -> failed | budget_exhausted | timeout | awaiting_human -> ...

A run row is (from, event class, to): `fold.apply` computes where an event
leads and this table says whether that move is legal. A call row is
(from, event class) -> to. Anything not listed raises `IllegalTransition`.
Rows name the event classes of `agentledger.events.types`, never their type strings, so a
misspelt or removed event fails to import (and mypy) instead of matching nothing."""

from __future__ import annotations

from agentledger.events.status import LIVE, TERMINAL, CallStatus, RunStatus
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    CallEvent,
    ChildRunEnded,
    ChildRunStarted,
    Event,
    FlowRouted,
    HumanReplied,
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
    RunHeld,
    RunReleased,
    RunResumed,
    RunTimedOut,
    ToolCallBackedOff,
    ToolCallCancelled,
    ToolCallConfirmedNotDone,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallLeaseExpired,
    ToolCallOutcomeUnknown,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallScheduled,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolCallValidated,
    ToolCallWaiting,
    ToolSampledModel,
)

R = RunStatus
C = CallStatus
Row = tuple[RunStatus | None, type[Event], RunStatus]
CallRow = tuple[CallStatus | None, type[CallEvent | ToolCallProposed]]

# where a turn's calls put the run (fold_calls.phase): validating while any is
# proposed, awaiting_approval while any waits for a person, running_tools,
# and requesting_model once every call has its result
V, A, T, M = R.VALIDATING, R.AWAITING_APPROVAL, R.RUNNING_TOOLS, R.REQUESTING_MODEL

_LIFECYCLE: tuple[Row, ...] = (
    (None, RunCreated, R.REQUESTING_MODEL),
    # past its tenant's cap of live runs on its queue: held until one of them ends
    (R.REQUESTING_MODEL, RunHeld, R.HELD),
    (R.HELD, RunReleased, R.REQUESTING_MODEL),
    (R.REQUESTING_MODEL, ModelRequested, R.REQUESTING_MODEL),
    (
        R.REQUESTING_MODEL,
        ModelRequestFailed,
        R.REQUESTING_MODEL,
    ),  # asked again, or a RunFailed follows
    (R.REQUESTING_MODEL, ModelResponded, R.VALIDATING),  # it asked for tools
    (R.REQUESTING_MODEL, ModelResponded, R.ACCEPTING),  # it ended its turn
    (R.REQUESTING_MODEL, ModelResponded, R.REQUESTING_MODEL),  # paused or cut off: go on
    (R.VALIDATING, ToolCallProposed, R.VALIDATING),
    *((V, ToolCallValidated, to) for to in (V, A, T)),
    *((V, ToolCallRejected, to) for to in (V, A, T, M)),
    *((V, ApprovalRequested, to) for to in (V, A)),
    (V, ApprovalGranted, V),  # answered while other calls are still validated
    (V, ApprovalDenied, V),
    *((A, ApprovalGranted, to) for to in (A, T)),
    *((A, ApprovalDenied, to) for to in (A, T, M)),
    (R.RUNNING_TOOLS, ToolCallWaiting, R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, ToolCallBackedOff, R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, ToolCallScheduled, R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, ToolCallLeaseExpired, R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, ToolCallStarted, R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, ToolCallOutcomeUnknown, R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, ToolCallConfirmedNotDone, R.RUNNING_TOOLS),
    *(
        (R.RUNNING_TOOLS, e, to)
        for e in (ToolCallSucceeded, ToolCallFailed)
        for to in (R.RUNNING_TOOLS, R.REQUESTING_MODEL)
    ),
    (R.ACCEPTING, AcceptanceStarted, R.ACCEPTING),
    (R.ACCEPTING, AcceptanceChecked, R.ACCEPTING),
    (R.ACCEPTING, AcceptanceFailed, R.REQUESTING_MODEL),
    (R.ACCEPTING, RunCompleted, R.COMPLETED),
    # a person answers a run that waits for one
    *((R.AWAITING_HUMAN, e, to) for e in (HumanReplied, RunResumed) for to in (V, A, T, M)),
    (R.AWAITING_HUMAN, ToolCallFailed, R.AWAITING_HUMAN),  # an unknown outcome, told as such
    (R.AWAITING_HUMAN, RunAborted, R.FAILED),
    # a lock holder that stopped renewing loses its locks while the run waits or stops
    (R.AWAITING_HUMAN, ToolCallLeaseExpired, R.AWAITING_HUMAN),
    (R.CANCELLING, ToolCallLeaseExpired, R.CANCELLING),
    # cancellation: recorded at once, finished when nothing runs any more
    (R.CANCELLING, ModelResponded, R.CANCELLING),  # recorded, not acted on
    (R.CANCELLING, RunCancelled, R.CANCELLED),
)

# a flow's own run (`agentledger.events.flow_state` has the flow's table): its stages
# go on while it is `flowing`; a gate is an escalation, its answer puts it back
_FLOWING: tuple[Row, ...] = (
    (None, RunCreated, R.FLOWING),
    *((R.FLOWING, e, R.FLOWING) for e in (ChildRunStarted, ChildRunEnded, FlowRouted)),
    (R.FLOWING, RunCompleted, R.COMPLETED),
    *((R.AWAITING_HUMAN, e, R.FLOWING) for e in (RunResumed, RunAborted, HumanReplied)),
    # cancelled while a child runs: the child is cancelled, its end recorded
    (R.CANCELLING, ChildRunEnded, R.CANCELLING),
    # a child that ends after its parent did: its spend is still recorded
    *((s, ChildRunEnded, s) for s in (R.FAILED, R.BUDGET_EXHAUSTED, R.TIMEOUT)),
    # a `delegate` call's child ended (events/delegate.py): its spend, with the call's outcome
    (R.RUNNING_TOOLS, ChildRunEnded, R.RUNNING_TOOLS),
)

_STOPPABLE = sorted(LIVE - {R.CANCELLING}) + [R.AWAITING_APPROVAL]

_ENDINGS: tuple[Row, ...] = (
    *((s, RunFailed, R.FAILED) for s in _STOPPABLE),
    *((s, RunBudgetExhausted, R.BUDGET_EXHAUSTED) for s in _STOPPABLE),
    *((s, RunTimedOut, R.TIMEOUT) for s in _STOPPABLE),
    *((s, RunEscalated, R.AWAITING_HUMAN) for s in _STOPPABLE),
    *((s, RunCancelRequested, R.CANCELLING) for s in (*_STOPPABLE, R.AWAITING_HUMAN, R.HELD)),
)

# A call that was running when the run stopped still reports what happened:
# the record of a side effect is never dropped, and the run's status stays.
_LATE = (
    ToolCallSucceeded,
    ToolCallFailed,
    ToolCallOutcomeUnknown,
    ToolCallCancelled,
    ToolCallForceTerminated,
)
_LATE_OUTCOMES: tuple[Row, ...] = tuple(
    (s, e, s)
    # completed is missing: acceptance runs only when every call has its result
    for s in (*sorted(TERMINAL - {R.COMPLETED}), R.AWAITING_HUMAN, R.CANCELLING)
    for e in _LATE
) + ((R.CANCELLED, ModelResponded, R.CANCELLED),)

# a check still running when its run was cancelled or ran out of wall clock is stopped
# too (SIGTERM, then SIGKILL), and recorded as such after the end
_STOPPED_CHECKS: tuple[Row, ...] = tuple(
    (s, AcceptanceCheckStopped, s) for s in (R.CANCELLED, R.TIMEOUT)
)

# an MCP server's model request during a call (sampling): the status stays; the
# call must be running, in whatever the run is doing meanwhile
_DURING_CALLS: tuple[Row, ...] = tuple(
    (s, ToolSampledModel, s) for s in (T, R.AWAITING_HUMAN, R.CANCELLING)
)

RUN_TRANSITIONS: frozenset[Row] = frozenset(
    _LIFECYCLE + _FLOWING + _ENDINGS + _LATE_OUTCOMES + _STOPPED_CHECKS + _DURING_CALLS
)

CALL_TRANSITIONS: dict[CallRow, CallStatus] = {
    (None, ToolCallProposed): C.PROPOSED,
    (C.PROPOSED, ToolCallValidated): C.VALIDATED,
    (C.PROPOSED, ToolCallRejected): C.REJECTED,
    (C.PROPOSED, ApprovalRequested): C.AWAITING_APPROVAL,
    (C.AWAITING_APPROVAL, ApprovalGranted): C.VALIDATED,
    (C.AWAITING_APPROVAL, ApprovalDenied): C.REJECTED,
    (C.VALIDATED, ToolCallWaiting): C.WAITING,
    (C.VALIDATED, ToolCallScheduled): C.SCHEDULED,
    (C.WAITING, ToolCallScheduled): C.SCHEDULED,
    (C.WAITING, ToolCallBackedOff): C.WAITING,  # still queued: a back-off closed its key
    (C.VALIDATED, ToolCallStarted): C.STARTED,  # it touches no resource: no locks
    (C.SCHEDULED, ToolCallStarted): C.STARTED,
    (C.SCHEDULED, ToolCallLeaseExpired): C.VALIDATED,  # granted, never started: ask again
    (C.STARTED, ToolCallLeaseExpired): C.STARTED,  # its claim's deadline decides the outcome
    (C.STARTED, ToolCallSucceeded): C.SUCCEEDED,
    (C.STARTED, ToolCallFailed): C.FAILED,
    (C.STARTED, ToolCallOutcomeUnknown): C.OUTCOME_UNKNOWN,
    (C.STARTED, ToolCallCancelled): C.CANCELLED,
    (C.STARTED, ToolCallForceTerminated): C.FORCE_TERMINATED,
    (C.OUTCOME_UNKNOWN, ToolCallStarted): C.STARTED,  # a read-only call tried again
    (C.OUTCOME_UNKNOWN, ToolCallWaiting): C.WAITING,
    (C.OUTCOME_UNKNOWN, ToolCallScheduled): C.SCHEDULED,
    (C.OUTCOME_UNKNOWN, ToolCallFailed): C.FAILED,  # its tries ran out, or a person moved on
    (C.OUTCOME_UNKNOWN, ToolCallSucceeded): C.SUCCEEDED,  # confirmed done, or its result came
    (C.OUTCOME_UNKNOWN, ToolCallConfirmedNotDone): C.VALIDATED,  # may run again, same key
}
