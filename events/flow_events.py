"""The events of a flow, in its own run's log (the parent's): a stage's child run
started and ended (the child's spend with it, so the parent's spend is the sum of
its children's), and where an outcome led. A gate is the run's own `RunEscalated`
(reason `flow_gate`), answered by `RunResumed` (approved) or `RunAborted` (denied)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentledger.events.event_model import EventModel
from agentledger.schemas.content import Usage
from agentledger.schemas.spec import RunSpec


class ChildRunStarted(EventModel):
    """A stage's child run was started: an agent stage, or a deterministic stage's one
    call. Its id is the parent's, the stage's and the attempt's (`flow_children.child_id`):
    a flow driven again after a crash finds the child it started, never a second one."""

    type: Literal["ChildRunStarted"] = "ChildRunStarted"
    stage: str
    attempt: int = Field(ge=1, description="how many times the flow has entered this stage")
    child_run_id: str
    spec: RunSpec = Field(description="the child's spec, as its RunCreated holds it")


class ChildRunEnded(EventModel):
    """A stage's child run ended: its status, its result (what later templates read)
    and what it spent, counted into the parent's."""

    type: Literal["ChildRunEnded"] = "ChildRunEnded"
    stage: str
    attempt: int = Field(ge=1)
    child_run_id: str
    outcome: str = Field(description="the stage's outcome: a child's end, or its call's")
    status: str = Field(description="the child run's terminal status")
    result: dict[str, Any] = Field(default_factory=dict, description="what later stages read")
    usage: Usage = Usage()
    cost_usd: float = Field(default=0.0, ge=0)
    turns: int = Field(default=0, ge=0, description="model responses the child used")
    detail: str = ""


class FlowRouted(EventModel):
    """A stage's outcome led somewhere: to a stage (`to`), or to the flow's end
    (`to` None). `loop` is set when it led back (to itself, or a stage before it)."""

    type: Literal["FlowRouted"] = "FlowRouted"
    stage: str
    outcome: str
    to: str | None
    loop: bool = False
