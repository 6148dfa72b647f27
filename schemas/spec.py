"""The run spec: what a user writes by hand (YAML) to start a run, and the tool
spec a registered tool declares. Unknown keys are refused so that a typo
never silently changes what a run does."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from agentledger.schemas.anthropic_spec import AnthropicModel as AnthropicModel  # re-exported
from agentledger.schemas.anthropic_spec import AnthropicSettings as AnthropicSettings
from agentledger.schemas.anthropic_spec import ServerTool as ServerTool
from agentledger.schemas.branch_spec import Branch as Branch  # re-exported
from agentledger.schemas.delegate_spec import DelegateSpec
from agentledger.schemas.flow_spec import Stage, check_flow
from agentledger.schemas.limits import MAX_LIMITS, Limit
from agentledger.schemas.model_capabilities import ModelCapabilities
from agentledger.schemas.names import QUEUE_PATTERN
from agentledger.schemas.openai_spec import OpenAIModel as OpenAIModel  # re-exported
from agentledger.schemas.replay_spec import ReplayModel as ReplayModel  # re-exported
from agentledger.schemas.replay_spec import ReplaySettings as ReplaySettings
from agentledger.schemas.scripted_spec import ScriptedCall as ScriptedCall
from agentledger.schemas.scripted_spec import ScriptedModel as ScriptedModel
from agentledger.schemas.scripted_spec import ScriptedTurn as ScriptedTurn
from agentledger.schemas.spec_base import Spec as _Spec


class Principal(_Spec):
    """Who the run acts for; a tool with a scope runs only if the principal holds it."""

    id: str = Field(min_length=1, description="who the run acts for")
    tenant: str = Field(
        min_length=1, description="whose data: ledger keys and replays stay within it"
    )
    scopes: tuple[str, ...] = Field(
        default=(), description="what it may do: a tool's `scope` must be here"
    )


class Price(_Spec):
    """US dollars per million tokens. `cache_write` is a 5-minute cache write,
    `cache_write_1h` a 1-hour one (None: twice the input price, as the API bills
    it). A model priced by prompt length names the longer prompts' price in
    `long_prompt`, which applies to every token of a request whose prompt
    (input, cache reads and writes) is over `long_prompt_over` tokens."""

    input: float = Field(ge=0, description="$ per million input tokens")
    output: float = Field(ge=0, description="$ per million output tokens")
    cache_read: float = Field(default=0.0, ge=0, description="$ per million cache-read tokens")
    cache_write: float = Field(
        default=0.0, ge=0, description="$ per million 5-minute cache-write tokens"
    )
    cache_write_1h: float | None = Field(
        default=None,
        ge=0,
        description="$ per million 1-hour cache-write tokens (None: twice `input`)",
    )
    web_search_per_1k: float = Field(default=10.0, ge=0, description="$ per 1,000 web searches")
    long_prompt_over: int | None = Field(
        default=None, ge=1, description="prompt tokens over which `long_prompt` prices the request"
    )
    long_prompt: Price | None = Field(default=None, description="the longer prompts' price")

    @model_validator(mode="after")
    def _tiers_together(self) -> Price:
        if (self.long_prompt is None) != (self.long_prompt_over is None):
            raise ValueError("'long_prompt' and 'long_prompt_over' go together")
        return self

    @property
    def one_hour_write(self) -> float:
        return self.cache_write_1h if self.cache_write_1h is not None else 2 * self.input


class Budgets(_Spec):
    """Limits that end a run in an explicit state when exhausted. Checked on the
    state machine's transitions: before each model request and each tool claim."""

    max_turns: int = Field(default=8, ge=1, le=10_000, description="model responses")
    max_input_tokens: int | None = Field(
        default=None,
        ge=1,
        description="input tokens, cached ones too; the next request's estimate counts",
    )
    max_output_tokens: int | None = Field(default=None, ge=1, description="output tokens")
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        description="US dollars; needs a price for the model (Claude ids have defaults)",
    )
    max_wall_clock_s: float | None = Field(
        default=None, gt=0, description="seconds from the run's creation; ends it `timeout`"
    )
    max_consecutive_failures: int | None = Field(
        default=None, ge=1, description="failing tool steps in a row"
    )
    tool_timeout_s: float | None = Field(
        default=None, gt=0, description="caps every tool's own timeout"
    )
    max_parallel_calls: int = Field(default=8, ge=1, description="calls of one run running at once")
    repeat_limit: int = Field(
        default=3, ge=2, description="identical failing steps in a row that send the run to a human"
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="per model id, overriding defaults"
    )


class Policies(_Spec):
    """How the run reacts to model stop reasons, approvals and cancellation."""

    on_max_tokens: Literal["continue", "fail"] = Field(
        default="continue",
        description="a reply cut at max_tokens: ask for more, or end the run failed "
        "(a cut-off tool call is never executed)",
    )
    on_refusal: Literal["escalate", "fail"] = Field(
        default="escalate", description="a refusal: wait for a person, or end the run failed"
    )
    approval_timeout_s: float = Field(
        default=3600.0, gt=0, description="an unanswered request is denied"
    )
    cancel_grace_s: float = Field(default=5.0, ge=0, description="SIGTERM to SIGKILL")
    claim_grace_s: float = Field(
        default=2.0,
        ge=0,
        description="a claim's deadline is the tool's timeout plus this; an unknown outcome is "
        "looked up only after it, so a write still under way is not taken for not done",
    )


def _key_tag(*keys: str) -> Discriminator:
    """Tell union members apart by which key a hand-written mapping has."""

    def tag(value: Any) -> str | None:
        if isinstance(value, BaseModel):
            value = value.model_dump()
        if isinstance(value, dict):
            return next((k for k in keys if k in value), None)
        return None

    expected = " or ".join(repr(k) for k in keys)
    return Discriminator(
        tag, custom_error_type="missing_key", custom_error_message=f"needs a key {expected}"
    )


# the key that names each provider in a spec, and its class: a new provider is a row here
MODELS: dict[str, type[ModelCapabilities]] = {
    "scripted": ScriptedModel,
    "anthropic": AnthropicModel,
    "openai": OpenAIModel,
    "replay": ReplayModel,
}
MODEL_KEYS = tuple(MODELS)
ModelSpec = Annotated[
    Annotated[ScriptedModel, Tag("scripted")]
    | Annotated[AnthropicModel, Tag("anthropic")]
    | Annotated[OpenAIModel, Tag("openai")]
    | Annotated[ReplayModel, Tag("replay")],
    _key_tag(*MODEL_KEYS),
]


class ContextSettings(_Spec):
    """What the model is shown of a long run; the log keeps every message in full."""

    budget_tokens: int = Field(
        default=150_000, ge=256, description="estimated at 4 characters a token"
    )
    keep_recent_turns: int = Field(default=4, ge=1, description="turns always sent in full")
    preview_chars: int = Field(
        default=200, ge=0, description="kept from the start of a shortened tool result"
    )


class CommandCheck(_Spec):
    """Passes when the command exits 0 in the run's workspace."""

    command: str = Field(min_length=1, description="a shell command, run in the sandbox")
    timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="held to AGENTLEDGER_MAX_COMMAND_TIMEOUT_S and the wall clock",
    )

    @field_validator("command")
    @classmethod
    def _no_nul(cls, command: str) -> str:
        if "\x00" in command:  # no process can be started with it: refused here, not at each try
            raise ValueError("a command cannot hold a NUL character (\\0)")
        return command


class ToolCheck(_Spec):
    """Passes when a registered read-only tool returns a value that contains `expect`."""

    tool: str = Field(min_length=1, description="a registered read-only tool")
    input: dict[str, Any] = Field(default_factory=dict, description="its arguments")
    expect: Any = Field(description="a subset of its result: every key given must match")


class FileCheck(_Spec):
    """Passes when a workspace file contains a string and/or matches a regex."""

    file: str = Field(min_length=1, description="a path relative to the workspace")
    contains: str | None = Field(default=None, description="a string the file must contain")
    matches: str | None = Field(
        default=None, description="a regex (RE2: linear time) the file must match, searched"
    )

    @model_validator(mode="after")
    def _something_to_check(self) -> FileCheck:
        if self.contains is None and self.matches is None:
            raise ValueError("a file check needs 'contains' or 'matches'")
        return self


class PythonCheck(_Spec):
    """Passes when `module:function(workspace)` returns True (or (True, evidence))."""

    python: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="module:function of a function decorated @check",
    )


AcceptanceCheck = Annotated[
    Annotated[CommandCheck, Tag("command")]
    | Annotated[ToolCheck, Tag("tool")]
    | Annotated[FileCheck, Tag("file")]
    | Annotated[PythonCheck, Tag("python")],
    _key_tag("command", "tool", "file", "python"),
]


NO_MODEL = ScriptedModel(scripted=(ScriptedTurn(end_turn="(a flow's own run asks no model)"),))


class RunSpec(_Spec):
    """A run: its task, who it acts for, its model, its tools, its budgets and
    what must be true at the end (`acceptance`)."""

    task: str = Field(min_length=1, description="what the run is for: the model's first message")
    workspace: str | None = Field(
        default=None,
        description="the folder its tools, commands and checks work in (relative: to the spec's folder)",
    )
    copy_workspace: bool | None = Field(
        default=None,
        description="unset or true: the run works in a copy of `workspace` the intake makes "
        "under the state folder; false: in `workspace` itself (inside a granted root)",
    )
    tools: tuple[str, ...] = Field(
        default=(), description="the tool modules the run needs: the workers' tool set"
    )
    tool_path: tuple[str, ...] = Field(
        default=(), description="folders searched for tool modules (the spec's folder is added)"
    )
    queue: str | None = Field(
        default=None,
        pattern=QUEUE_PATTERN,
        description="the task queue whose workers serve the run ('default' when unnamed)",
    )
    system: str | None = Field(default=None, description="the system text sent with every request")
    principal: Principal
    budgets: Budgets = Budgets()
    policies: Policies = Policies()
    model: ModelSpec = Field(
        description="exactly one of "
        + ", ".join(f"`{k}`" for k in MODEL_KEYS)
        + " (a flow's: its agent stages' default, which a flow may leave out when each "
        "stage names its own)",
    )
    flow: tuple[Stage, ...] | None = Field(
        default=None,
        description="stages run in order, routed by outcome (docs/guide/flows.md); the "
        "budgets are the whole flow's",
    )
    max_loops: int = Field(
        default=3, ge=0, le=100, description="a flow's returns to a stage it has run already"
    )
    delegate: DelegateSpec | None = Field(
        default=None, description="child runs (docs/guide/flows.md)"
    )
    acceptance: tuple[AcceptanceCheck, ...] = Field(
        default=(), description="checks that must all pass for the run to end `completed`"
    )
    context: ContextSettings = ContextSettings()
    secrets: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...] = Field(
        default=(), description="environment variables whose values are secret"
    )
    keep_secrets_in_log: bool = Field(
        default=False, description="false: secrets are redacted before events are appended"
    )
    branch: Branch | None = Field(
        default=None,
        description="the run and turn this run branched from (a run of the same tenant only)",
    )

    @field_validator("flow")
    @classmethod
    def _flow_routes(cls, flow: tuple[Stage, ...] | None) -> tuple[Stage, ...] | None:
        return flow if flow is None else check_flow(flow)  # an error at `flow:`

    @model_validator(mode="after")
    def _flow_checked(self) -> RunSpec:
        if self.flow is None:
            return self
        for stage in self.flow:
            if stage.agent is not None:
                agent_parts(stage, None if self.model == NO_MODEL else self.model)
        return self

    @model_validator(mode="before")
    @classmethod
    def _flow_needs_no_model(cls, data: Any) -> Any:
        """A flow whose agent stages each name their model names none of its own: its
        run holds `NO_MODEL`, which nothing asks (its own run never requests a model)."""
        if isinstance(data, dict) and data.get("flow") is not None and "model" not in data:
            return {**data, "model": NO_MODEL}
        return data


def agent_parts(
    stage: Stage, default: ModelSpec | None
) -> tuple[ModelSpec, Budgets, tuple[AcceptanceCheck, ...]]:
    """An agent stage's model (else `default`), budgets and acceptance, read as a run's
    (ValueError naming the stage and what is wrong)."""
    agent = stage.agent
    assert agent is not None
    try:
        if agent.model is not None:
            model = _MODEL.validate_python(agent.model)
        elif default is None:
            raise ValueError("no 'model', and the flow names none")
        else:
            model = default
        budgets = Budgets.model_validate(agent.budgets)
        return model, budgets, _CHECKS.validate_python(agent.acceptance)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"stage {stage.id!r}: {where}: {first['msg']}") from None
    except ValueError as exc:
        raise ValueError(f"stage {stage.id!r}: {exc}") from None


_MODEL: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)
_CHECKS: TypeAdapter[tuple[AcceptanceCheck, ...]] = TypeAdapter(tuple[AcceptanceCheck, ...])


class ToolSpec(_Spec):
    """What a registered tool declares: its model-facing interface and its execution contract."""

    name: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    scope: str | None = None
    timeout_s: float = Field(default=30.0, gt=0)
    max_concurrency: int | None = Field(
        default=None, ge=1, description="calls of this tool at once, per run"
    )
    limits: tuple[Limit, ...] = Field(
        default=(),
        max_length=MAX_LIMITS,
        description="concurrency keys shared by every run: a call holds a slot of each",
    )
