"""The events of a run's acceptance: the claim of its checks, each verdict, a
check stopped with its run, and the failures sent back to the model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentledger.events.event_model import EventModel, Overflow, Snapshots


class AcceptanceStarted(EventModel):
    """The model ended its turn: the acceptance worker claimed the checks until
    `deadline_at`."""

    type: Literal["AcceptanceStarted"] = "AcceptanceStarted"
    attempt: int = Field(ge=1)
    deadline_at: float


class AcceptanceChecked(EventModel):
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
    snapshots: Snapshots | None = Field(
        default=None,
        description="the workspace the check judged (before) and left (after: a command may write)",
    )


Signal = Literal["SIGTERM", "SIGKILL"]


class AcceptanceCheckStopped(EventModel):
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


class AcceptanceFailed(EventModel):
    """Checks failed with turns left: the failures go back to the model."""

    type: Literal["AcceptanceFailed"] = "AcceptanceFailed"
    feedback: str
