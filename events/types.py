"""Event types: past-tense facts, frozen, each with a `type` tag, together a
discriminated union (`Event`). Each family lives in a module of its own
(`run_events`, `model_events`, `call_events`, `acceptance_events`, `mcp_events`; the base and
the types inside events in `event_model`); every name is importable from here.
Add an event to its family's module, to the union below, in `fold.py`, in
`transitions.py` (the table) and in a unit test."""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import BaseModel, Field

from agentledger.events.acceptance_events import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    Signal,
)
from agentledger.events.call_events import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    CallEvent,
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
)
from agentledger.events.event_model import (
    ErrorCode,
    FieldError,
    Overflow,
    ToolError,
)
from agentledger.events.flow_events import ChildRunEnded, ChildRunStarted, FlowRouted
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.model_events import (
    ModelErrorKind,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    StopReason,
)
from agentledger.events.run_events import (
    DEFAULT_QUEUE,
    BudgetName,
    EscalationReason,
    HumanReplied,
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
)
from agentledger.schemas.codec import EventCodec

__all__ = [
    "AcceptanceCheckStopped",
    "AcceptanceChecked",
    "AcceptanceFailed",
    "AcceptanceStarted",
    "ApprovalDenied",
    "ApprovalGranted",
    "ApprovalRequested",
    "BudgetName",
    "CODEC",
    "CallEvent",
    "ChildRunEnded",
    "ChildRunStarted",
    "DEFAULT_QUEUE",
    "EVENT_TYPES",
    "ErrorCode",
    "EscalationReason",
    "Event",
    "FieldError",
    "FlowRouted",
    "HumanReplied",
    "ModelErrorKind",
    "ModelRequestFailed",
    "ModelRequested",
    "ModelResponded",
    "Overflow",
    "RunAborted",
    "RunBudgetExhausted",
    "RunCancelRequested",
    "RunCancelled",
    "RunCompleted",
    "RunCreated",
    "RunEscalated",
    "RunFailed",
    "RunHeld",
    "RunReleased",
    "RunResumed",
    "RunTimedOut",
    "Signal",
    "StopReason",
    "ToolCallBackedOff",
    "ToolCallCancelled",
    "ToolCallConfirmedNotDone",
    "ToolCallFailed",
    "ToolCallForceTerminated",
    "ToolCallLeaseExpired",
    "ToolCallOutcomeUnknown",
    "ToolCallProposed",
    "ToolCallRejected",
    "ToolCallScheduled",
    "ToolCallStarted",
    "ToolCallSucceeded",
    "ToolCallValidated",
    "ToolCallWaiting",
    "ToolError",
    "ToolSampledModel",
]

Event = Annotated[
    RunCreated
    | RunHeld
    | RunReleased
    | ModelRequested
    | ModelRequestFailed
    | ModelResponded
    | ToolCallProposed
    | CallEvent
    | AcceptanceStarted
    | AcceptanceChecked
    | AcceptanceCheckStopped
    | AcceptanceFailed
    | RunCompleted
    | RunFailed
    | RunBudgetExhausted
    | RunEscalated
    | RunCancelRequested
    | RunCancelled
    | HumanReplied
    | RunResumed
    | RunAborted
    | RunTimedOut
    | ToolSampledModel
    | ChildRunStarted
    | ChildRunEnded
    | FlowRouted,
    Field(discriminator="type"),
]

EVENT_TYPES: dict[str, type[BaseModel]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}

CODEC = EventCodec(EVENT_TYPES)
