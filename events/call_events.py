"""The events that move one tool call: proposed, validated (or waiting for
approval, or rejected), its locks, its claim, and its outcome."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentledger.events.event_model import EventModel, Overflow, Snapshots, ToolError


class ToolCallProposed(EventModel):
    """The model asked for a tool call (one per `tool_use` block). A proposal only:
    nothing runs until the call is validated."""

    type: Literal["ToolCallProposed"] = "ToolCallProposed"
    call_id: str
    turn: int = Field(ge=1)
    name: str
    input: dict[str, Any]


class _Cleared(EventModel):
    """What validation found about a call that may run: its resources and limits."""

    call_id: str
    read_only: bool
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    timeout_s: float
    max_concurrency: int | None = None
    limits: dict[str, int] = Field(
        default_factory=dict, description="concurrency keys shared by every run, and their max"
    )
    op_key: str | None = Field(default=None, description="the business operation a write is")
    request_hash: str | None = Field(default=None, description="the validated arguments' digest")
    resolvable: bool = Field(default=False, description="the tool can look up an unknown outcome")
    output_cap: int | None = Field(default=None, description="characters of output the model sees")


class ToolCallValidated(_Cleared):
    """The call may run: registered in the worker's tool set, valid arguments,
    the principal's scope, no approval needed. Its resources and limits are fixed here."""

    type: Literal["ToolCallValidated"] = "ToolCallValidated"


class ApprovalRequested(_Cleared):
    """The call is valid but waits for a person; unanswered by `expires_at` it is denied."""

    type: Literal["ApprovalRequested"] = "ApprovalRequested"
    expires_at: float
    reason: str


class ApprovalGranted(EventModel):
    """A person approved a call awaiting approval; it goes on to its locks."""

    type: Literal["ApprovalGranted"] = "ApprovalGranted"
    call_id: str
    by: str
    note: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class ApprovalDenied(EventModel):
    """A person denied a call (or its approval expired: `expired`); the model is
    told and the tool never runs."""

    type: Literal["ApprovalDenied"] = "ApprovalDenied"
    call_id: str
    by: str
    note: str = ""
    expired: bool = False
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class ToolCallRejected(EventModel):
    """Validation refused the call (unknown tool, invalid arguments, no scope…);
    the error goes back to the model and the tool never runs."""

    type: Literal["ToolCallRejected"] = "ToolCallRejected"
    call_id: str
    error: ToolError


class ToolCallWaiting(EventModel):
    """The call's lock request is queued behind holders or earlier waiters."""

    type: Literal["ToolCallWaiting"] = "ToolCallWaiting"
    call_id: str
    request_id: str
    waiting_for: tuple[str, ...] = Field(default=(), description="resources not free yet")
    holders: dict[str, int] = Field(
        default_factory=dict, description="each concurrency key's holders when it began waiting"
    )
    closed_until: float | None = Field(
        default=None, description="a concurrency key is closed by a service's back-off until then"
    )


class ToolCallBackedOff(EventModel):
    """A waiting call now waits for a service's back-off too: a call of some run was
    answered `rate_limited` with `retry_after_s`, which closed these concurrency keys
    for every run until `until` (the lock table's time). Nothing else changes: the
    call stays queued, and the model is not asked again."""

    type: Literal["ToolCallBackedOff"] = "ToolCallBackedOff"
    call_id: str
    request_id: str
    keys: tuple[str, ...]
    until: float


class ToolCallScheduled(EventModel):
    """Every lock the call needs is granted, with a fencing token per resource."""

    type: Literal["ToolCallScheduled"] = "ToolCallScheduled"
    call_id: str
    request_id: str
    tokens: dict[str, int]
    lease_until: float


class ToolCallLeaseExpired(EventModel):
    """The holder stopped renewing its locks; they passed on."""

    type: Literal["ToolCallLeaseExpired"] = "ToolCallLeaseExpired"
    call_id: str
    request_id: str


class ToolCallStarted(EventModel):
    """The claim: appended before the tool runs, so a redelivery cannot run it twice."""

    type: Literal["ToolCallStarted"] = "ToolCallStarted"
    call_id: str
    attempt: int = Field(ge=1)
    worker: str
    deadline_at: float
    claimed_at: float | None = None


class ToolCallSucceeded(EventModel):
    """The tool ran and returned `output` (or the ledger answered: `replay_of`;
    or an unknown outcome was resolved: `resolved_by`)."""

    type: Literal["ToolCallSucceeded"] = "ToolCallSucceeded"
    call_id: str
    output: Any
    started_at: float
    finished_at: float
    resolved_by: Literal["lookup", "late_outcome"] | None = Field(
        default=None,
        description="the outcome was unknown; the tool's lookup confirmed it, or its result came late",
    )
    replay_of: str | None = Field(
        default=None, description="the same operation was done before (run/call): not run again"
    )
    stdout: str | None = Field(default=None, description="what the tool printed (bounded)")
    stderr: str | None = Field(default=None, description="what the tool wrote to stderr (bounded)")
    overflow: Overflow | None = Field(
        default=None, description="the output was cut: `output` is its text's head"
    )
    snapshots: Snapshots | None = Field(
        default=None, description="the workspace before and after this write (None: not taken)"
    )


class ToolCallFailed(EventModel):
    """The call ended with a coded error the model sees (`error.retryable` says
    whether trying again can help)."""

    type: Literal["ToolCallFailed"] = "ToolCallFailed"
    call_id: str
    error: ToolError
    started_at: float | None = None
    finished_at: float
    stdout: str | None = Field(default=None, description="what the tool printed (bounded)")
    stderr: str | None = Field(default=None, description="what the tool wrote to stderr (bounded)")
    overflow: Overflow | None = Field(default=None, description="the error's message was cut")
    traceback: str | None = Field(
        default=None,
        description="the tool raised an unexpected exception: its last frames (bounded; never told the model)",
    )
    snapshots: Snapshots | None = Field(
        default=None, description="the workspace before and after this write (None: not taken)"
    )


class ToolCallOutcomeUnknown(EventModel):
    """A claimed call with no result: it may or may not have had its effect."""

    type: Literal["ToolCallOutcomeUnknown"] = "ToolCallOutcomeUnknown"
    call_id: str
    reason: str


class ToolCallConfirmedNotDone(EventModel):
    """The tool's lookup confirms an unknown write did not happen: it may run again
    with the same operation key."""

    type: Literal["ToolCallConfirmedNotDone"] = "ToolCallConfirmedNotDone"
    call_id: str
    op_key: str


class ToolCallCancelled(EventModel):
    """The call stopped by itself after it was asked to (`detail`: how it was asked:
    its cancel flag, and SIGTERM to the commands it had running)."""

    type: Literal["ToolCallCancelled"] = "ToolCallCancelled"
    call_id: str
    requested_at: float
    stopped_at: float
    detail: str = ""


class ToolCallForceTerminated(EventModel):
    """The call ignored the request to stop and was killed after the grace period."""

    type: Literal["ToolCallForceTerminated"] = "ToolCallForceTerminated"
    call_id: str
    requested_at: float
    terminated_at: float
    detail: str


CallEvent = (
    ToolCallValidated
    | ApprovalRequested
    | ApprovalGranted
    | ApprovalDenied
    | ToolCallRejected
    | ToolCallWaiting
    | ToolCallBackedOff
    | ToolCallScheduled
    | ToolCallLeaseExpired
    | ToolCallStarted
    | ToolCallSucceeded
    | ToolCallFailed
    | ToolCallOutcomeUnknown
    | ToolCallConfirmedNotDone
    | ToolCallCancelled
    | ToolCallForceTerminated
)
"""The events that move one tool call (folded in `fold_calls`)."""
