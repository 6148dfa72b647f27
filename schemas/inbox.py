"""Messages outside systems publish to the inbox stream, as JSON in the entry's
`message` field. Validated on intake; a malformed entry is moved to the
rejected stream with its reason."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.names import QUEUE_PATTERN
from schemas.spec import RunSpec

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
TOOLSET_PATTERN = r"^[0-9a-f]{16,64}$"


class RunRequested(BaseModel):
    """Start a run. Paths in the spec resolve from `base_dir` (absolute)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["RunRequested"] = "RunRequested"
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN)
    request_id: str | None = Field(default=None, description="re-publishing the same id is a no-op")
    spec: RunSpec
    base_dir: str | None = None
    workspace: str | None = Field(
        default=None, description="absolute workspace; overrides the spec's"
    )
    queue: str | None = Field(
        default=None, pattern=QUEUE_PATTERN, description="overrides the spec's task queue"
    )
    toolset: str | None = Field(
        default=None,
        pattern=TOOLSET_PATTERN,
        description="the fingerprint of the tool code to run with (`agentledger toolset` "
        "prints it); unnamed, the one tool set the queue's workers serve for the spec's tools",
    )


class _Control(BaseModel):
    """A person or system speaking to a live run; `by` is who."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    by: str = Field(min_length=1)


class RunCancelRequested(_Control):
    type: Literal["RunCancelRequested"] = "RunCancelRequested"
    reason: str = ""


class ApprovalGranted(_Control):
    type: Literal["ApprovalGranted"] = "ApprovalGranted"
    call_id: str = Field(min_length=1)
    note: str = ""


class ApprovalDenied(_Control):
    type: Literal["ApprovalDenied"] = "ApprovalDenied"
    call_id: str = Field(min_length=1)
    note: str = ""


class HumanReplied(_Control):
    """Guidance for a run awaiting a human; it goes to the model as text."""

    type: Literal["HumanReplied"] = "HumanReplied"
    text: str = Field(min_length=1)


class RunResumed(_Control):
    type: Literal["RunResumed"] = "RunResumed"
    note: str = ""


class RunAborted(_Control):
    type: Literal["RunAborted"] = "RunAborted"
    note: str = ""


Control = (
    RunCancelRequested | ApprovalGranted | ApprovalDenied | HumanReplied | RunResumed | RunAborted
)

InboxMessage = Annotated[RunRequested | Control, Field(discriminator="type")]
