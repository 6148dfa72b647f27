"""The two state machines as tables. Read them top to bottom like the lifecycle:

    requesting_model -> validating -> running_tools -> requesting_model ...
    requesting_model -> accepting -> completed | requesting_model | failed
    any live state -> failed | budget_exhausted | awaiting_human

A run row is (from, event type, to): `fold.apply` computes where an event
leads and this table says whether that move is legal. A call row is
(from, event type) -> to. Anything not listed raises `IllegalTransition`."""

from __future__ import annotations

from events.status import LIVE, CallStatus, RunStatus

R = RunStatus
C = CallStatus

_LIFECYCLE: tuple[tuple[RunStatus | None, str, RunStatus], ...] = (
    (None, "RunCreated", R.REQUESTING_MODEL),
    (R.REQUESTING_MODEL, "ModelRequested", R.REQUESTING_MODEL),
    (R.REQUESTING_MODEL, "ModelResponded", R.VALIDATING),  # it asked for tools
    (R.REQUESTING_MODEL, "ModelResponded", R.ACCEPTING),  # it ended its turn
    (R.REQUESTING_MODEL, "ModelResponded", R.REQUESTING_MODEL),  # anything else: decide next
    (R.VALIDATING, "ToolCallProposed", R.VALIDATING),
    (R.VALIDATING, "ToolCallValidated", R.VALIDATING),
    (R.VALIDATING, "ToolCallValidated", R.RUNNING_TOOLS),  # the turn's last decision
    (R.VALIDATING, "ToolCallRejected", R.VALIDATING),
    (R.VALIDATING, "ToolCallRejected", R.RUNNING_TOOLS),
    (R.VALIDATING, "ToolCallRejected", R.REQUESTING_MODEL),  # every call rejected
    (R.RUNNING_TOOLS, "ToolCallStarted", R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, "ToolCallOutcomeUnknown", R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, "ToolCallSucceeded", R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, "ToolCallSucceeded", R.REQUESTING_MODEL),  # the turn's last result
    (R.RUNNING_TOOLS, "ToolCallFailed", R.RUNNING_TOOLS),
    (R.RUNNING_TOOLS, "ToolCallFailed", R.REQUESTING_MODEL),
    (R.ACCEPTING, "AcceptanceStarted", R.ACCEPTING),
    (R.ACCEPTING, "AcceptanceChecked", R.ACCEPTING),
    (R.ACCEPTING, "AcceptanceFailed", R.REQUESTING_MODEL),
    (R.ACCEPTING, "RunCompleted", R.COMPLETED),
)

_ENDINGS: tuple[tuple[RunStatus | None, str, RunStatus], ...] = tuple(
    (live, event_type, to)
    for live in sorted(LIVE)
    for event_type, to in (
        ("RunFailed", R.FAILED),
        ("RunBudgetExhausted", R.BUDGET_EXHAUSTED),
        ("RunEscalated", R.AWAITING_HUMAN),
    )
)

RUN_TRANSITIONS: frozenset[tuple[RunStatus | None, str, RunStatus]] = frozenset(
    _LIFECYCLE + _ENDINGS
)

CALL_TRANSITIONS: dict[tuple[CallStatus | None, str], CallStatus] = {
    (None, "ToolCallProposed"): C.PROPOSED,
    (C.PROPOSED, "ToolCallValidated"): C.VALIDATED,
    (C.PROPOSED, "ToolCallRejected"): C.REJECTED,
    (C.VALIDATED, "ToolCallStarted"): C.STARTED,
    (C.STARTED, "ToolCallSucceeded"): C.SUCCEEDED,
    (C.STARTED, "ToolCallFailed"): C.FAILED,
    (C.STARTED, "ToolCallOutcomeUnknown"): C.OUTCOME_UNKNOWN,
    (C.OUTCOME_UNKNOWN, "ToolCallStarted"): C.STARTED,  # a read-only call tried again
    (C.OUTCOME_UNKNOWN, "ToolCallFailed"): C.FAILED,  # its tries ran out
}

RUN_EVENTS_BY_STATUS: dict[RunStatus | None, frozenset[str]] = {}
for _src, _etype, _dst in RUN_TRANSITIONS:
    RUN_EVENTS_BY_STATUS[_src] = RUN_EVENTS_BY_STATUS.get(_src, frozenset()) | {_etype}
