"""The events of a run as a whole: its creation, the controls a person sends,
and the terminal facts (completed, failed, out of budget, timed out, escalated)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentledger.events.event_model import EventModel
from agentledger.schemas.spec import RunSpec

EscalationReason = Literal[
    "repeated_failure", "refusal", "outcome_unknown", "tool_question", "flow_gate", "child_waits"
]


BudgetName = Literal["turns", "input_tokens", "output_tokens", "cost", "consecutive_failures"]


DEFAULT_QUEUE = "default"


class RunCreated(EventModel):
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
    parent_run_id: str | None = Field(
        default=None, description="the flow's run this run is a stage of (None: none)"
    )
    stage: str | None = Field(default=None, description="the parent's stage it runs")


class RunHeld(EventModel):
    """The run was created past its tenant's cap of live runs on its task queue
    (`AGENTLEDGER_MAX_LIVE_RUNS_PER_TENANT`): it waits, recorded, for one of that
    tenant's live runs on the queue to end (`agentledger.events.run_caps`). `place` is its
    place in the tenant's line on the queue when it was held (1: next)."""

    type: Literal["RunHeld"] = "RunHeld"
    tenant: str = Field(description="the tenant of the run's principal, as its grant allowed")
    queue: str = Field(description="the task queue whose cap it is past")
    place: int = Field(ge=1, description="its place in the tenant's line when it was held")
    max_live: int = Field(ge=1, description="the tenant's cap of live runs on the queue")


class RunReleased(EventModel):
    """A held run's turn came (one of its tenant's live runs on the queue ended): it
    starts now, its wall clock counted from here."""

    type: Literal["RunReleased"] = "RunReleased"
    held_s: float = Field(ge=0, description="how long it was held")


class RunCancelRequested(EventModel):
    """Someone asked the run to stop: running calls get their cancel flag and
    SIGTERM, then SIGKILL after the policy's `cancel_grace_s`."""

    type: Literal["RunCancelRequested"] = "RunCancelRequested"
    by: str
    source: str
    reason: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunCancelled(EventModel):
    """Nothing is rolled back: `side_effects` lists what had already happened."""

    type: Literal["RunCancelled"] = "RunCancelled"
    requested_at: float
    by: str
    side_effects: tuple[str, ...]
    detail: str


class HumanReplied(EventModel):
    """A person's guidance goes to the model as text; counting repeats starts afresh."""

    type: Literal["HumanReplied"] = "HumanReplied"
    by: str
    text: str
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunResumed(EventModel):
    """A person let a run awaiting a human go on."""

    type: Literal["RunResumed"] = "RunResumed"
    by: str
    note: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunAborted(EventModel):
    """A person ended a run awaiting a human: it ends `failed`."""

    type: Literal["RunAborted"] = "RunAborted"
    by: str
    note: str = ""
    publisher: str | None = Field(
        default=None, description="the inbox publisher that signed it (None: not through the inbox)"
    )


class RunTimedOut(EventModel):
    """The run's wall-clock budget ran out: it ends `timeout`."""

    type: Literal["RunTimedOut"] = "RunTimedOut"
    limit_s: float
    elapsed_s: float
    detail: str


class RunCompleted(EventModel):
    """Every acceptance check passed: the run ends `completed`."""

    type: Literal["RunCompleted"] = "RunCompleted"
    detail: str


class RunFailed(EventModel):
    """The run ends `failed`: checks failed with no turns left, a stop the run does
    not continue from, a model error retrying cannot fix, or an abort."""

    type: Literal["RunFailed"] = "RunFailed"
    reason: str
    detail: str


class RunBudgetExhausted(EventModel):
    """A budget would be exceeded by the next step: the run ends
    `budget_exhausted`, saying what was used and what was done."""

    type: Literal["RunBudgetExhausted"] = "RunBudgetExhausted"
    budget: BudgetName
    used: float
    limit: float
    detail: str


class RunEscalated(EventModel):
    """The run needs a human before it can move on."""

    type: Literal["RunEscalated"] = "RunEscalated"
    reason: EscalationReason
    detail: str
    question: dict[str, Any] | None = Field(
        default=None,
        description="a tool's question (MCP elicitation): the JSON Schema of the answer it asks for",
    )
