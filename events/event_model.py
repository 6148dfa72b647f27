"""The base of every event, and the types events hold (a call's error, an overflow):
frozen pydantic models that refuse fields they do not know."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentledger.schemas.model_build import deferred

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


# the base of every event and of the types inside them (no docstring: a model's
# docstring is its description in the reference and in JSON Schema, and it is inherited
# by none of them)
class EventModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=deferred())


class FieldError(EventModel):
    loc: str
    msg: str


class ToolError(EventModel):
    """What went wrong with a call, in terms the model can act on."""

    code: ErrorCode
    message: str
    retryable: bool
    fields: tuple[FieldError, ...] = ()
    retry_after_s: float | None = None


class Overflow(EventModel):
    """A tool-made field too large for its event (`agentledger.events.output_cap.cut_event`): the
    event holds the first `head` characters of the field's text, and the run's
    overflow pages the rest, `page_chars` characters a page, under `ref`."""

    field: Literal["output", "error.message", "evidence"]
    ref: str = Field(min_length=1)
    chars: int = Field(ge=0, description="the whole text's length, in characters")
    head: int = Field(ge=0)
    page_chars: int = Field(ge=1)
    pages: int = Field(ge=1)


class Snapshots(EventModel):
    """The workspace as it was just before and just after a write call ran, each a
    content-addressed tree id (`agentledger.events.workspace_tree`) whose files are
    kept in the operator's snapshot store; `note` says what was left out (a cap)."""

    before: str = Field(min_length=1)
    after: str = Field(min_length=1)
    note: str | None = Field(default=None, description="entries left out of a snapshot, and why")
