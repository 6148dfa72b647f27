"""The tool API: `@tool` on a plain function registers it; `@check` declares a
function an acceptance check (`python: module:function` in a spec).

The input schema comes from the function's type hints via pydantic; a
parameter annotated `ToolContext` is not part of the input and receives the
run's workspace, ids and cancel flag. Only registered tools ever execute, and
a `python:` check calls only a function declared with `@check` — never a tool
function raw (no validation, scope, locks or ledger) nor any other attribute.
A tool without a docstring or with parameters without type hints is registered
with a warning naming it and what the model will not see."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from agentledger.events.delegate import DELEGATE
from agentledger.events.idempotency import operation_key
from agentledger.events.tool_step import Outcome
from agentledger.events.types import FieldError
from agentledger.schemas.limits import Limit
from agentledger.schemas.spec import Principal, ToolSpec
from agentledger.services.adapters.tools.context import (
    Lookup,
    ToolCancelled,
    ToolContext,
    ToolFailure,
)

__all__ = ["REGISTRY", "Lookup", "ToolCancelled", "ToolContext", "ToolFailure", "check", "tool"]

Resources = Callable[..., Iterable[str]]  # (args) or (args, ctx)
LookupFn = Callable[[str, dict[str, Any], ToolContext], Lookup]
Approval = Literal["always", "never"] | Callable[[dict[str, Any], Principal], bool]


@dataclass(frozen=True)
class RegisteredTool:
    spec: ToolSpec
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    context_param: str | None
    reads: Resources
    writes: Resources
    module: str
    approval: Approval = "never"
    key_fields: tuple[str, ...] | None = None
    lookup: LookupFn | None = None
    output_cap: int | None = None
    network: bool = False  # its commands (ctx.run) may reach the network
    quick: bool = False  # run on the calling thread, no hand-off (`runner.run_tool`)

    def op_key(
        self, args: dict[str, Any], tenant: str, writes: Sequence[str], *, run_id: str
    ) -> str | None:
        """The operation key of a write (reads have none), from the validated arguments."""
        if self.spec.read_only:
            return None
        return operation_key(
            tenant, self.spec.name, self.canonical(args), self.key_fields, writes, run_id=run_id
        )

    def canonical(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as validated, defaults filled in: `2` and `"2"` are one request."""
        dumped: dict[str, Any] = self.args_model.model_validate(args).model_dump(mode="json")
        return dumped

    def check(self, raw: dict[str, Any]) -> tuple[dict[str, Any], list[FieldError]]:
        """Arguments as the function receives them, or the field errors."""
        try:
            parsed = self.args_model.model_validate(raw)
        except ValidationError as exc:
            return {}, [
                FieldError(loc=".".join(str(p) for p in e["loc"]) or "(input)", msg=e["msg"])
                for e in exc.errors()
            ]
        return {**parsed.__dict__, **(parsed.__pydantic_extra__ or {})}, []

    def resources(self, args: dict[str, Any], workspace: str | None) -> tuple[list[str], list[str]]:
        return _resources(self.reads, args, workspace), _resources(self.writes, args, workspace)

    def approval_reason(self, args: dict[str, Any], principal: Principal) -> str | None:
        """Why a person must approve this call, or None."""
        match self.approval:
            case "never":
                return None
            case "always":
                return f"{self.spec.name} always needs approval"
            case predicate:
                return (
                    f"{self.spec.name}'s approval rule asks for it"
                    if predicate(args, principal)
                    else None
                )

    def offered_to(self, asked: tuple[str, ...] | list[str]) -> bool:
        """Is it offered to a run whose spec's `tools:` are `asked`? A module's tools when
        the spec names the module (a run's tool set is made of exactly its modules; a
        flow's stage names some of its flow's), the built-in ones always."""
        if self.spec.name == DELEGATE and self.module == BUILTIN:
            return DELEGATE in asked  # `offered(spec)`: only when the spec sets `delegate:`
        return self.module in asked or self.module == BUILTIN

    def call(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if self.context_param:
            return self.fn(**args, **{self.context_param: ctx})
        return self.fn(**args)


BUILTIN = "agentledger.services.adapters.tools.builtin"  # the built-in tools' module


class ExternalTool(RegisteredTool):
    """A tool served by something outside this process (an MCP server): it runs
    the call itself, with the timeout, the stop watch and the grace, and says
    what happened. Validation, resources, approval and op keys are as above."""

    def execute(
        self,
        args: dict[str, Any],
        ctx: ToolContext,
        *,
        timeout_s: float,
        stop_requested: Callable[[], float | None],
        grace_s: float,
    ) -> Outcome:
        raise NotImplementedError


class ToolRegistry:
    """Every `@tool` function imported in this process, by module. A worker offers
    only the tools of its tool set's modules (`agentledger.services.adapters.tools.toolset`)."""

    def __init__(self) -> None:
        self._by_module: dict[str, dict[str, RegisteredTool]] = {}
        self._checks: dict[tuple[str, str], Callable[..., Any]] = {}  # (module, name) -> fn
        self._lock = threading.Lock()

    def add(self, t: RegisteredTool) -> None:
        with self._lock:
            self._by_module.setdefault(t.module, {})[t.spec.name] = t

    def of_module(self, module: str) -> list[RegisteredTool]:
        with self._lock:
            return list(self._by_module.get(module, {}).values())

    def add_check(self, fn: Callable[..., Any]) -> None:
        with self._lock:
            self._checks[(fn.__module__, fn.__qualname__)] = fn

    def is_check(self, fn: object) -> bool:
        """Is `fn` itself a function declared with `@check` (not merely one of its name)?"""
        module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(name, str):
            return False
        with self._lock:
            return self._checks.get((module, name)) is fn


REGISTRY = ToolRegistry()
log = logging.getLogger(__name__)


F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F) -> F: ...


@overload
def tool(
    fn: None = None,
    *,
    read_only: bool = ...,
    reads: Resources | None = ...,
    writes: Resources | None = ...,
    scope: str | None = ...,
    timeout_s: float = ...,
    approval: Approval = ...,
    max_concurrency: int | None = ...,
    limits: Sequence[Mapping[str, Any] | Limit] = ...,
    key_fields: Sequence[str] | None = ...,
    lookup: LookupFn | None = ...,
    output_cap: int | None = ...,
    network: bool = ...,
    quick: bool = ...,
    name: str | None = ...,
    description: str | None = ...,
) -> Callable[[F], F]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    read_only: bool = False,
    reads: Resources | None = None,
    writes: Resources | None = None,
    scope: str | None = None,
    timeout_s: float = 30.0,
    approval: Approval = "never",
    max_concurrency: int | None = None,
    limits: Sequence[Mapping[str, Any] | Limit] = (),
    key_fields: Sequence[str] | None = None,
    lookup: LookupFn | None = None,
    output_cap: int | None = 4000,
    network: bool = False,
    quick: bool = False,
    name: str | None = None,
    description: str | None = None,
) -> Any:
    """Register a function as a tool. Use bare (`@tool`) or with options.
    `network=True` lets the commands it runs with `ctx.run` reach the network;
    without it they are cut off (a network namespace of their own). `quick=True`
    (a read-only tool that returns in well under a millisecond: no I/O, no
    commands) runs on the worker's own thread instead of being handed to a thread
    of its own; it cannot be stopped while it runs, so one that overruns its
    timeout is recorded as timed out and runs in a thread from then on."""
    declared = _Declared(
        read_only=read_only,
        reads=reads,
        writes=writes,
        scope=scope,
        timeout_s=timeout_s,
        approval=approval,
        max_concurrency=max_concurrency,
        limits=tuple(Limit.model_validate(x) for x in limits),
        key_fields=key_fields,
        lookup=lookup,
        output_cap=output_cap,
        network=network,
        quick=quick,
        name=name,
        description=description,
    )

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        REGISTRY.add(declared.registered(f))
        return f

    return register(fn) if fn is not None else register


@dataclass(frozen=True)
class _Declared:
    """What `@tool(...)` says besides the function."""

    read_only: bool
    reads: Resources | None
    writes: Resources | None
    scope: str | None
    timeout_s: float
    approval: Approval
    max_concurrency: int | None
    limits: tuple[Limit, ...]
    key_fields: Sequence[str] | None
    lookup: LookupFn | None
    output_cap: int | None
    network: bool
    quick: bool
    name: str | None
    description: str | None

    def __post_init__(self) -> None:
        if self.quick and not self.read_only:
            raise ValueError("quick=True is for read-only tools (a write is never run unwatched)")

    def registered(self, f: Callable[..., Any]) -> RegisteredTool:
        """`f` as a tool: its input schema from its type hints, its spec, its rules."""
        model, ctx_param = _args_model(f)
        if (lacks := _what_the_model_lacks(f, self.description, ctx_param)) is not None:
            log.warning("tool %r of module %r has %s", self.name or f.__name__, f.__module__, lacks)
        spec = ToolSpec(
            name=self.name or f.__name__,
            description=self.description or inspect.getdoc(f) or "",
            input_schema=_input_schema(model),
            read_only=self.read_only,
            scope=self.scope,
            timeout_s=self.timeout_s,
            max_concurrency=self.max_concurrency,
            limits=self.limits,
        )
        return RegisteredTool(
            spec=spec,
            fn=f,
            args_model=model,
            context_param=ctx_param,
            reads=self.reads or (lambda a: ()),
            writes=self.writes or (lambda a: ()),
            module=f.__module__,
            approval=self.approval,
            key_fields=tuple(self.key_fields) if self.key_fields else None,
            lookup=self.lookup,
            output_cap=self.output_cap,
            network=self.network,
            quick=self.quick,
        )


def check(fn: F) -> F:
    """Declare a function an acceptance check: `python: module:function` in a spec
    calls it with the run's workspace (a path, or None); it returns whether the
    check passed, or `(passed, evidence)`. Only functions declared so are called."""
    if not callable(fn):
        raise TypeError(f"@check decorates a function, not {type(fn).__name__}")
    REGISTRY.add_check(fn)
    return fn


def not_a_check(target: str) -> str:
    """Why a `python:` check's `module:function` is not called."""
    return f"{target!r} is not declared a check: only functions decorated with @check are called"


def _resources(rule: Resources, args: dict[str, Any], workspace: str | None) -> list[str]:
    """A rule takes the arguments, or the arguments and the run's workspace."""
    found = rule(args, workspace) if _takes_workspace(rule) else rule(args)
    return sorted(set(found))


_ARITY: dict[Any, bool] = {}  # rule -> takes the workspace: `inspect.signature` is ~10 µs a call


def _takes_workspace(rule: Resources) -> bool:
    try:
        return _ARITY[rule]
    except KeyError:
        takes = _ARITY[rule] = len(inspect.signature(rule).parameters) >= 2
        return takes
    except TypeError:  # an unhashable callable: asked each time
        return len(inspect.signature(rule).parameters) >= 2


def _what_the_model_lacks(
    f: Callable[..., Any], description: str | None, ctx_param: str | None
) -> str | None:
    """What a tool's model-facing interface lacks, said once when it is registered.
    It is still registered: the model can call it (it sees the parameters' names,
    and the function gets what it is sent), but it calls it blind."""
    lacks: list[str] = []
    if not (description or inspect.getdoc(f)):
        lacks.append(
            "no docstring: the model sees an empty description (write one, or pass description=)"
        )
    bare = [
        p.name
        for p in inspect.signature(f).parameters.values()
        if p.annotation is inspect.Parameter.empty and p.name != ctx_param
    ]
    if bare:
        lacks.append(
            f"no type hint for {', '.join(bare)}: the model is told any value will do ({{}} in "
            "its input schema) and none is checked"
        )
    return " and ".join(lacks) or None


def _args_model(f: Callable[..., Any]) -> tuple[type[BaseModel], str | None]:
    hints = get_type_hints(f)
    fields: dict[str, Any] = {}
    ctx_param = None
    for p in inspect.signature(f).parameters.values():
        hint = hints.get(p.name, Any)
        if hint is ToolContext:
            ctx_param = p.name
            continue
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hint, default)
    config = ConfigDict(extra="forbid", strict=False)
    model = create_model(f"{f.__name__}_input", __config__=config, **fields)
    return model, ctx_param


def _input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema
