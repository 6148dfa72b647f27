"""A flow in a run spec (`flow:`): stages in order, each an agent stage (a child run
with its own task, tools, model, budgets and acceptance), a deterministic stage (one
registered tool call) or a human gate (a question a person approves or denies), and
where each stage's outcome leads (`on:`). What the outcomes are and how a flow moves
is `agentledger.events.flow_table`; the templates in task, input and question are
`agentledger.events.flow_template` (checked here: a template naming a stage the flow
does not have is refused before anything runs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from agentledger.schemas.spec_base import Spec

STAGE_ID_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
STOP = "stop"  # a route's end: the flow ends here
NEXT = "next"  # a route to the stage after this one in the list
MAX_STAGES = 32

AgentOutcome = Literal[
    "completed", "failed", "budget_exhausted", "timeout", "cancelled", "awaiting_human"
]
CallOutcome = Literal["succeeded", "failed"]
GateOutcome = Literal["approved", "denied", "replied"]
Target = Annotated[str, Field(pattern=r"^([a-z][a-z0-9_]{0,31})$")]


class AgentStage(Spec):
    """A bounded agent run inside the flow: a child run of the flow's run, with the
    flow's principal and workspace; its budgets are held to what the flow has left."""

    task: str = Field(min_length=1, description="its task; {input.task}, {stage.result.key}")
    tools: tuple[str, ...] | None = Field(
        default=None, description="tool modules (among the flow's); unset: the flow's"
    )
    model: dict[str, Any] | None = Field(
        default=None, description="its model, as a run's `model:` (unset: the flow's)"
    )
    system: str | None = Field(default=None, description="its system text")
    budgets: dict[str, Any] = Field(
        default_factory=dict, description="its budgets, as a run's (held to the flow's)"
    )
    acceptance: tuple[dict[str, Any], ...] = Field(
        default=(), description="its acceptance checks, as a run's"
    )


class CallStage(Spec):
    """One registered tool call, its arguments templated from earlier results; it goes
    through validation, locks, the ledger and idempotency like any call."""

    tool: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9_-]{1,64}$", description="the tool")
    input: dict[str, Any] = Field(default_factory=dict, description="its arguments (templated)")


class HumanStage(Spec):
    """A gate: the flow waits for a person (`approve RUN` or `resume`, `deny RUN` or
    `abort`, or `reply RUN TEXT` when its `on:` routes `replied`), showing the question
    and the evidence so far."""

    question: str = Field(min_length=1, description="what the person is asked (templated)")


class Stage(Spec):
    """One stage: exactly one of `agent`, `call` or `human`, and its routes."""

    id: str = Field(pattern=STAGE_ID_PATTERN, description="its name, unique in the flow")
    agent: AgentStage | None = None
    call: CallStage | None = None
    human: HumanStage | None = None
    on: dict[str, Target] = Field(
        default_factory=dict,
        description="outcome -> stage id, `next` or `stop` (unset: a success goes on to "
        "the next stage, anything else ends the flow in that outcome's state)",
    )

    @model_validator(mode="before")
    @classmethod
    def _on_as_written(cls, data: Any) -> Any:
        """YAML 1.1 reads a bare `on:` key as true (as GitHub Actions' files meet): it
        is the routes."""
        if isinstance(data, dict) and True in data and "on" not in data:
            return {("on" if k is True else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> Stage:
        given = [k for k in ("agent", "call", "human") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"stage {self.id!r} needs exactly one of 'agent', 'call' or 'human'")
        allowed = OUTCOMES[given[0]]
        for outcome in self.on:
            if outcome not in allowed:
                raise ValueError(
                    f"stage {self.id!r}: no outcome {outcome!r} for a {given[0]} stage "
                    f"(its outcomes: {', '.join(allowed)})"
                )
        return self

    @property
    def kind(self) -> Literal["agent", "call", "human"]:
        return "agent" if self.agent else "call" if self.call else "human"


OUTCOMES: dict[str, tuple[str, ...]] = {
    "agent": ("completed", "failed", "budget_exhausted", "timeout", "cancelled", "awaiting_human"),
    "call": ("succeeded", "failed"),
    "human": ("approved", "denied", "replied"),
}
SUCCESS = frozenset({"completed", "succeeded", "approved"})


def check_flow(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """`stages`, their ids unique, every route to a stage the flow has (ValueError naming it)."""
    if not stages:
        raise ValueError("a flow needs at least one stage")
    if len(stages) > MAX_STAGES:
        raise ValueError(f"a flow has at most {MAX_STAGES} stages, not {len(stages)}")
    ids = [s.id for s in stages]
    seen: set[str] = set()
    for sid in ids:
        if sid in seen:
            raise ValueError(f"stage id {sid!r} is used twice")
        if sid in ("input", STOP, NEXT):
            raise ValueError(f"stage id {sid!r} is a reserved word")
        seen.add(sid)
    for stage in stages:
        for outcome, to in stage.on.items():
            if to not in seen and to not in (STOP, NEXT):
                raise ValueError(
                    f"stage {stage.id!r}: {outcome} leads to {to!r}, which is no stage of the flow"
                )
    return stages
