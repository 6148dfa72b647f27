"""Messages outside systems publish to the inbox stream, as JSON in the entry's
`message` field. Validated on intake; a malformed entry is moved to the
rejected stream with its reason.

Every message carries, inside the signed bytes, when it was issued (`issued_at`,
unix seconds) and a `nonce` of its own: the intake refuses one outside its
replay window or whose nonce it has seen (`agentledger.services.loops.intake.publish` stamps
both just before signing; built without them, a message is refused). A control
that answers a human escalation names it (`escalation`: the seq of the
`RunEscalated` event), so a late or replayed answer never answers a later one."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentledger.schemas.model_build import deferred
from agentledger.schemas.names import QUEUE_PATTERN, RUN_ID_PATTERN
from agentledger.schemas.spec import RunSpec

TOOLSET_PATTERN = r"^[0-9a-f]{16,64}$"
NONCE_PATTERN = r"^[A-Za-z0-9_-]{16,128}$"


class _Stamped(BaseModel):
    """What makes each signed message one of a kind: when, and a nonce."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())
    issued_at: float | None = Field(
        default=None, description="unix seconds when it was signed; the intake refuses one "
        "outside its replay window (AGENTLEDGER_REPLAY_WINDOW_S, 300 s either side)",
    )  # fmt: skip
    nonce: str | None = Field(
        default=None, pattern=NONCE_PATTERN,
        description="a random text of this message alone; the intake refuses one it has seen",
    )  # fmt: skip


class RunRequested(_Stamped):
    """Start a run. Paths in the spec resolve from `base_dir` (absolute)."""

    type: Literal["RunRequested"] = "RunRequested"
    run_id: str | None = Field(default=None, pattern=RUN_ID_PATTERN)
    request_id: str | None = Field(
        default=None,
        description="the same publisher re-publishing the same request under it gets the same run",
    )
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


class _Control(_Stamped):
    """A person or system speaking to a live run; `by` is who (the run's event
    records the publisher that signed it beside)."""

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


class _Answer(_Control):
    """An answer to the run's escalation: refused unless it names the current one."""

    escalation: int = Field(
        ge=0, description="the seq of the RunEscalated event this answers (`status --json` "
        "shows the run's current one)",
    )  # fmt: skip


class HumanReplied(_Answer):
    """Guidance for a run awaiting a human; it goes to the model as text."""

    type: Literal["HumanReplied"] = "HumanReplied"
    text: str = Field(min_length=1)


class RunResumed(_Answer):
    type: Literal["RunResumed"] = "RunResumed"
    note: str = ""


class RunAborted(_Answer):
    type: Literal["RunAborted"] = "RunAborted"
    note: str = ""


Control = (
    RunCancelRequested | ApprovalGranted | ApprovalDenied | HumanReplied | RunResumed | RunAborted
)

InboxMessage = Annotated[RunRequested | Control, Field(discriminator="type")]
