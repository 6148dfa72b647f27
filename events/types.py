"""Event types: past-tense facts, frozen, each with a `type` tag, together a
discriminated union. Add an event here, in `fold.py`, in `transitions.py`
(the table) and in a unit test."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from schemas.codec import EventCodec
from schemas.content import ContentBlock, Usage
from schemas.context import ContextDecision
from schemas.spec import RunSpec

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]

# what went wrong with one model request, as the adapter classified it; which of
# these a later attempt may get past is `events.model_retry`'s rule
ModelErrorKind = Literal[
    "connection",  # refused, reset, the host's name not found: nothing answered
    "timeout",  # no answer in time
    "rate_limited",  # 429
    "overloaded",  # 529
    "server_error",  # 5xx, 408, 409, an `api_error` in the stream
    "stream_broken",  # the stream stopped before the message was complete
    "authentication",  # 401: the key is wrong
    "permission",  # 403: the key may not use this model or feature
    "not_found",  # 404: no such model
    "invalid_request",  # 400 and the other 4xx: the request itself is wrong
    "request_too_large",  # 413
    "billing",  # the account cannot pay
    "malformed_reply",  # the reply broke the protocol (an unknown stop reason, a bad block)
    "not_configured",  # nothing was sent: the worker has no key, or the spec asks for what the API refuses
    "other",
]

EscalationReason = Literal["repeated_failure", "refusal", "outcome_unknown"]

BudgetName = Literal["turns", "input_tokens", "output_tokens", "cost", "consecutive_failures"]

ErrorCode = Literal[
    "unknown_tool",
    "not_found",
    "invalid_arguments",
    "permission_denied",
    "rate_limited",
    "timeout",
    "outcome_unknown",
    "conflict",
    "internal",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FieldError(_Event):
    loc: str
    msg: str


class ToolError(_Event):
    """What went wrong with a call, in terms the model can act on."""

    code: ErrorCode
    message: str
    retryable: bool
    fields: tuple[FieldError, ...] = ()
    retry_after_s: float | None = None


DEFAULT_QUEUE = "default"


class RunCreated(_Event):
    """The intake created the run: its spec, where it works, who published it.
    `queue` is the task queue the run's commands go to; `toolset` the fingerprint
    of the tool code that may serve it: a worker with other code never takes them."""

    type: Literal["RunCreated"] = "RunCreated"
    spec: RunSpec
    request_id: str | None = None
    workspace: str | None = Field(default=None, description="absolute path the run works in")
    base_dir: str | None = Field(default=None, description="folder the spec's paths resolve from")
    queue: str = Field(default=DEFAULT_QUEUE, min_length=1, description="the task queue")
    toolset: str = Field(default="", description="fingerprint of the tool set that serves it")
    publisher: str | None = Field(
        default=None,
        description="who published the request; the spec's principal holds only the scopes "
        "its grant allows",
    )


class ModelRequested(_Event):
    """A model worker claimed the turn's model call until `deadline_at`."""

    type: Literal["ModelRequested"] = "ModelRequested"
    turn: int = Field(ge=1)
    attempt: int = Field(ge=1)
    deadline_at: float
    context_hash: str | None = Field(default=None, description="sha256 of the view sent")
    context_tokens: int | None = Field(default=None, description="its estimated size")
    context_decisions: tuple[ContextDecision, ...] = ()
    model: str | None = Field(
        default=None,
        description="the model asked, when the spec names one (a fallback after a refusal)",
    )


class ModelRequestFailed(_Event):
    """The turn's model request (attempt `attempt`) failed: `cause` says how, in one
    line (`connection refused at http://127.0.0.1:1`). With `retry_at` the turn is
    asked again from then on; without it the run ends (a RunFailed follows)."""

    type: Literal["ModelRequestFailed"] = "ModelRequestFailed"
    turn: int = Field(ge=1)
    attempt: int = Field(ge=1)
    kind: ModelErrorKind
    cause: str
    status: int | None = Field(default=None, description="the HTTP status, when one came")
    retry_at: float | None = Field(default=None, description="when the next attempt may start")


class ModelResponded(_Event):
    """The model's reply to a turn's request: every content block verbatim, why it
    stopped, and the usage it was billed for."""

    type: Literal["ModelResponded"] = "ModelResponded"
    turn: int = Field(ge=1)
    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage = Usage()
    model: str
    retries: tuple[str, ...] = Field(default=(), description="API errors retried before this reply")
    stop_sequence: str | None = Field(default=None, description="which stop sequence fired")
    stop_details: dict[str, Any] | None = Field(
        default=None, description="why it stopped, as the API said (a refusal's category)"
    )


class ToolCallProposed(_Event):
    """The model asked for a tool call (one per `tool_use` block). A proposal only:
    nothing runs until the call is validated."""

    type: Literal["ToolCallProposed"] = "ToolCallProposed"
    call_id: str
    turn: int = Field(ge=1)
    name: str
    input: dict[str, Any]


class _Cleared(_Event):
    """What validation found about a call that may run: its resources and limits."""

    call_id: str
    read_only: bool
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    timeout_s: float
    max_concurrency: int | None = None
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


class ApprovalGranted(_Event):
    """A person approved a call awaiting approval; it goes on to its locks."""

    type: Literal["ApprovalGranted"] = "ApprovalGranted"
    call_id: str
    by: str
    note: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class ApprovalDenied(_Event):
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


class ToolCallRejected(_Event):
    """Validation refused the call (unknown tool, invalid arguments, no scope…);
    the error goes back to the model and the tool never runs."""

    type: Literal["ToolCallRejected"] = "ToolCallRejected"
    call_id: str
    error: ToolError


class ToolCallWaiting(_Event):
    """The call's lock request is queued behind holders or earlier waiters."""

    type: Literal["ToolCallWaiting"] = "ToolCallWaiting"
    call_id: str
    request_id: str
    waiting_for: tuple[str, ...] = Field(default=(), description="resources not free yet")


class ToolCallScheduled(_Event):
    """Every lock the call needs is granted, with a fencing token per resource."""

    type: Literal["ToolCallScheduled"] = "ToolCallScheduled"
    call_id: str
    request_id: str
    tokens: dict[str, int]
    lease_until: float


class ToolCallLeaseExpired(_Event):
    """The holder stopped renewing its locks; they passed on."""

    type: Literal["ToolCallLeaseExpired"] = "ToolCallLeaseExpired"
    call_id: str
    request_id: str


class ToolCallStarted(_Event):
    """The claim: appended before the tool runs, so a redelivery cannot run it twice."""

    type: Literal["ToolCallStarted"] = "ToolCallStarted"
    call_id: str
    attempt: int = Field(ge=1)
    worker: str
    deadline_at: float
    claimed_at: float | None = None


class Overflow(_Event):
    """A tool-made field too large for its event (`events.output_cap.cut_event`): the
    event holds the first `head` characters of the field's text, and the run's
    overflow pages the rest, `page_chars` characters a page, under `ref`."""

    field: Literal["output", "error.message", "evidence"]
    ref: str = Field(min_length=1)
    chars: int = Field(ge=0, description="the whole text's length, in characters")
    head: int = Field(ge=0)
    page_chars: int = Field(ge=1)
    pages: int = Field(ge=1)


class ToolCallSucceeded(_Event):
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


class ToolCallFailed(_Event):
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


class ToolCallOutcomeUnknown(_Event):
    """A claimed call with no result: it may or may not have had its effect."""

    type: Literal["ToolCallOutcomeUnknown"] = "ToolCallOutcomeUnknown"
    call_id: str
    reason: str


class ToolCallConfirmedNotDone(_Event):
    """The tool's lookup confirms an unknown write did not happen: it may run again
    with the same operation key."""

    type: Literal["ToolCallConfirmedNotDone"] = "ToolCallConfirmedNotDone"
    call_id: str
    op_key: str


class ToolCallCancelled(_Event):
    """The call stopped by itself after it was asked to (`detail`: how it was asked:
    its cancel flag, and SIGTERM to the commands it had running)."""

    type: Literal["ToolCallCancelled"] = "ToolCallCancelled"
    call_id: str
    requested_at: float
    stopped_at: float
    detail: str = ""


class ToolCallForceTerminated(_Event):
    """The call ignored the request to stop and was killed after the grace period."""

    type: Literal["ToolCallForceTerminated"] = "ToolCallForceTerminated"
    call_id: str
    requested_at: float
    terminated_at: float
    detail: str


class RunCancelRequested(_Event):
    """Someone asked the run to stop: running calls get their cancel flag and
    SIGTERM, then SIGKILL after the policy's `cancel_grace_s`."""

    type: Literal["RunCancelRequested"] = "RunCancelRequested"
    by: str
    source: str
    reason: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunCancelled(_Event):
    """Nothing is rolled back: `side_effects` lists what had already happened."""

    type: Literal["RunCancelled"] = "RunCancelled"
    requested_at: float
    by: str
    side_effects: tuple[str, ...]
    detail: str


class HumanReplied(_Event):
    """A person's guidance goes to the model as text; counting repeats starts afresh."""

    type: Literal["HumanReplied"] = "HumanReplied"
    by: str
    text: str
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunResumed(_Event):
    """A person let a run awaiting a human go on."""

    type: Literal["RunResumed"] = "RunResumed"
    by: str
    note: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunAborted(_Event):
    """A person ended a run awaiting a human: it ends `failed`."""

    type: Literal["RunAborted"] = "RunAborted"
    by: str
    note: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunTimedOut(_Event):
    """The run's wall-clock budget ran out: it ends `timeout`."""

    type: Literal["RunTimedOut"] = "RunTimedOut"
    limit_s: float
    elapsed_s: float
    detail: str


class AcceptanceStarted(_Event):
    """The model ended its turn: the acceptance worker claimed the checks until
    `deadline_at`."""

    type: Literal["AcceptanceStarted"] = "AcceptanceStarted"
    attempt: int = Field(ge=1)
    deadline_at: float


class AcceptanceChecked(_Event):
    """One acceptance check's verdict, on evidence the acceptance worker gathered."""

    type: Literal["AcceptanceChecked"] = "AcceptanceChecked"
    index: int = Field(ge=0)
    check: str = Field(description="what was checked, in words")
    passed: bool
    evidence: dict[str, Any]
    started_at: float | None = Field(
        default=None, description="evidence older than a later write does not count"
    )
    checked_at: float
    depends_on: tuple[str, ...] = Field(default=(), description="resources; '*' is any write")
    overflow: Overflow | None = Field(
        default=None, description="the evidence was cut: it holds its text's head and its reason"
    )


Signal = Literal["SIGTERM", "SIGKILL"]


class AcceptanceCheckStopped(_Event):
    """A check that was running when its run stopped (cancelled, or out of wall
    clock): its command got SIGTERM and, still running after the run's
    `cancel_grace_s`, SIGKILL (`signals`, in the order sent). It has no verdict."""

    type: Literal["AcceptanceCheckStopped"] = "AcceptanceCheckStopped"
    attempt: int = Field(ge=1)
    index: int = Field(ge=0)
    check: str = Field(description="what was checked, in words")
    requested_at: float = Field(description="when the run asked to stop (the log's time)")
    stopped_at: float
    signals: tuple[Signal, ...]
    detail: str


class AcceptanceFailed(_Event):
    """Checks failed with turns left: the failures go back to the model."""

    type: Literal["AcceptanceFailed"] = "AcceptanceFailed"
    feedback: str


class RunCompleted(_Event):
    """Every acceptance check passed: the run ends `completed`."""

    type: Literal["RunCompleted"] = "RunCompleted"
    detail: str


class RunFailed(_Event):
    """The run ends `failed`: checks failed with no turns left, a stop the run does
    not continue from, a model error retrying cannot fix, or an abort."""

    type: Literal["RunFailed"] = "RunFailed"
    reason: str
    detail: str


class RunBudgetExhausted(_Event):
    """A budget would be exceeded by the next step: the run ends
    `budget_exhausted`, saying what was used and what was done."""

    type: Literal["RunBudgetExhausted"] = "RunBudgetExhausted"
    budget: BudgetName
    used: float
    limit: float
    detail: str


class RunEscalated(_Event):
    """The run needs a human before it can move on."""

    type: Literal["RunEscalated"] = "RunEscalated"
    reason: EscalationReason
    detail: str


CallEvent = (
    ToolCallValidated
    | ApprovalRequested
    | ApprovalGranted
    | ApprovalDenied
    | ToolCallRejected
    | ToolCallWaiting
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

Event = Annotated[
    RunCreated
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
    | RunTimedOut,
    Field(discriminator="type"),
]

EVENT_TYPES: dict[str, type[BaseModel]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}

CODEC = EventCodec(EVENT_TYPES)
