"""Traces from the log: the OpenTelemetry spans a run's events stand for, with
the GenAI semantic conventions' names and attributes. Pure: the same log gives
the same spans (ids included) wherever and whenever it is read, so a past run
is exported exactly as a live one was.

One `invoke_agent` span per run (RunCreated → its terminal event), one `chat`
span per model request (ModelRequested → ModelResponded, or ModelRequestFailed
with its cause; a claim that expired ends where the next attempt starts; its
`gen_ai.usage.input_tokens` counts the cached prompt too, as the conventions
ask, the run's span carries its totals as `agentledger.usage.*`, so a trace's
`gen_ai.usage.*` add up to the provider's usage once), one `execute_tool` span per tool call
(ToolCallProposed → the event that finishes it), the calls' steps (validated,
waiting for locks, approval, claimed) as span events, acceptance checks and the
people's controls as events of the run's span. `chat` and `execute_tool` are
children of `invoke_agent`, in the order of the log. Ids are digests of the
run id (and turn, attempt, call id): a worker knows a `chat` span's id before
the span is written, so the model SDK's own request span can be its child.

`SpanBuilder` is fed envelopes in seq order and returns the spans each one
ends (the live exporter sends those); `spans_of` is the whole trace at once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from agentledger.events.fold import apply
from agentledger.events.mcp_events import ToolSampledModel
from agentledger.events.span_ids import chat_span_id as chat_span_id
from agentledger.events.span_ids import run_span_id as run_span_id
from agentledger.events.span_ids import sampled_span_id
from agentledger.events.span_ids import tool_span_id as tool_span_id
from agentledger.events.span_ids import trace_id_of as trace_id_of
from agentledger.events.state import Call, RunState
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceFailed,
    AcceptanceStarted,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    HumanReplied,
    ModelRequested,
    ModelRequestFailed,
    ModelResponded,
    RunAborted,
    RunCancelRequested,
    RunCreated,
    RunEscalated,
    RunResumed,
    ToolCallFailed,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallScheduled,
    ToolCallStarted,
    ToolCallWaiting,
)
from agentledger.schemas.content import Usage
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import RunSpec

AttrValue = str | bool | int | float | tuple[str, ...]
Attributes = Mapping[str, AttrValue]
AGENT_NAME = "agentledger"


class SpanKind(StrEnum):
    INTERNAL = "internal"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    at: float
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """`end` is None while the span is open (a live run); `error` is the status
    message of a span that ended badly, None when it ended well."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str | None
    name: str
    kind: SpanKind
    start: float
    end: float | None
    attributes: Attributes
    events: tuple[SpanEvent, ...] = ()
    error: str | None = None
    start_seq: int = 0
    end_seq: int | None = None


def model_of(spec: RunSpec) -> tuple[str, str]:
    """(provider name, model id) of a run's model as the GenAI conventions name them."""
    return spec.model.provider, spec.model.model_id


def spans_of(envelopes: Iterable[Envelope[Any]]) -> list[Span]:
    """Every span of the log, ended or still open, in the order they started."""
    builder = SpanBuilder()
    ended = [s for env in envelopes for s in builder.add(env)]
    return sorted([*ended, *builder.open_spans()], key=lambda s: s.start_seq)


class SpanBuilder:
    """Turns a run's envelopes, fed in seq order, into spans; `add` returns the
    spans that envelope ended. It folds the run alongside (the fold says when a
    call or the run is finished), so a broken log raises as `apply` does."""

    def __init__(self) -> None:
        self.state: RunState | None = None
        self._open: dict[str, Span] = {}  # by span id, in the order they opened

    @property
    def seq(self) -> int:
        return self.state.seq if self.state else 0

    def open_spans(self) -> list[Span]:
        return list(self._open.values())

    def add(self, env: Envelope[Any]) -> list[Span]:
        self.state = apply(self.state, env)
        event, state, ended = env.data, self.state, []
        if isinstance(event, RunCreated):
            self._start(_run_span(env, event))
        elif isinstance(event, ModelRequested):
            prior = [s for s in self._open.values() if s.attributes.get("agentledger.turn") == event.turn
                     and s.attributes.get("gen_ai.operation.name") == "chat"]  # fmt: skip
            ended += [self._end(s.span_id, env, error="no reply: the claim expired") for s in prior]
            self._start(_chat_span(env, event, state))
        elif isinstance(event, ModelResponded | ModelRequestFailed):
            ended += self._model_answer(env, event)
        elif isinstance(event, ToolCallProposed):
            self._start(_tool_span(env, event))
        elif isinstance(event, ToolSampledModel):  # an MCP server's sampling, in its call
            ended += [_sampled_span(env, event), *self._call_step(env, event.call_id)]
        elif (call_id := getattr(event, "call_id", None)) is not None:
            ended += self._call_step(env, str(call_id))
        else:
            self._note(run_span_id(env.run_id), env)
        if state.status.terminal:
            ended += self._end_run(env, state)
        return ended

    def _model_answer(self, env: Envelope[Any], event: ModelResponded | ModelRequestFailed) -> list[Span]:  # fmt: skip
        chat = self._open_chat(event.turn)
        if chat is None:
            return []
        if isinstance(event, ModelResponded):
            return [self._end(chat, env, attributes=_reply_attributes(event))]
        failed: dict[str, AttrValue] = {"error.type": event.kind}
        return [self._end(chat, env, error=event.cause, attributes=failed)]

    def _call_step(self, env: Envelope[Any], call_id: str) -> list[Span]:
        span_id = tool_span_id(env.run_id, call_id)
        if span_id not in self._open:
            return []
        self._note(span_id, env)
        call = _call(self.state, call_id)
        if call is None or not call.status.finished:
            return []
        error = None if call.status.value == "succeeded" else _call_error(env, call)
        attributes: dict[str, AttrValue] = {"agentledger.call.status": str(call.status)}
        if call.error is not None:
            attributes["error.type"] = call.error.code
        return [self._end(span_id, env, error=error, attributes=attributes)]

    def _end_run(self, env: Envelope[Any], state: RunState) -> list[Span]:
        root = run_span_id(env.run_id)
        ended = [
            self._end(s, env, error=f"the run ended {state.status} first")
            for s in list(self._open) if s != root
        ]  # fmt: skip
        if root in self._open:
            ok = state.status.value == "completed"
            error = None if ok else f"{state.status}: {state.detail}".rstrip(": ")
            ended.append(self._end(root, env, error=error, attributes=_run_totals(state)))
        return ended

    def _open_chat(self, turn: int) -> str | None:
        chats = [s.span_id for s in self._open.values()
                 if s.attributes.get("gen_ai.operation.name") == "chat"
                 and s.attributes.get("agentledger.turn") == turn]  # fmt: skip
        return chats[-1] if chats else None

    def _start(self, span: Span) -> None:
        self._open[span.span_id] = span

    def _note(self, span_id: str, env: Envelope[Any]) -> None:
        span = self._open.get(span_id)
        if span is not None:
            step = SpanEvent(env.type, env.at, _event_attributes(env))
            self._open[span_id] = replace(span, events=(*span.events, step))

    def _end(
        self,
        span_id: str,
        env: Envelope[Any],
        *,
        error: str | None = None,
        attributes: Attributes | None = None,
    ) -> Span:
        span = self._open.pop(span_id)
        merged = {**span.attributes, **(attributes or {})}
        return replace(span, end=env.at, end_seq=env.seq, error=error, attributes=merged)


def _call(state: RunState | None, call_id: str) -> Call | None:
    if state is None:
        return None
    for turn in reversed(state.turns[-2:]):  # a call ends in its turn, or just after it
        if (call := turn.call(call_id)) is not None:
            return call
    return None


def _call_error(env: Envelope[Any], call: Call) -> str:
    event = env.data
    if isinstance(event, ApprovalDenied):
        return f"denied by {event.by}" + (" (expired)" if event.expired else "")
    if isinstance(event, ToolCallRejected | ToolCallFailed):
        return f"{event.error.code}: {event.error.message}"
    return str(call.status)


def _span(env: Envelope[Any], span_id: str, name: str, kind: SpanKind, attributes: Attributes, *, root: bool = False) -> Span:  # fmt: skip
    parent = None if root else run_span_id(env.run_id)
    return Span(trace_id_of(env.run_id), span_id, parent, name, kind, env.at, None,
                attributes, start_seq=env.seq)  # fmt: skip


def _run_span(env: Envelope[Any], event: RunCreated) -> Span:
    provider, model = model_of(event.spec)
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.agent.id": env.run_id,
        "gen_ai.agent.description": event.spec.task,
        "gen_ai.conversation.id": env.run_id,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "agentledger.run.id": env.run_id,
        "agentledger.queue": event.queue,
        "agentledger.principal.id": event.spec.principal.id,
        "agentledger.principal.tenant": event.spec.principal.tenant,
    }
    name = f"invoke_agent {AGENT_NAME}"
    return _span(env, run_span_id(env.run_id), name, SpanKind.INTERNAL, attributes, root=True)


def _chat_span(env: Envelope[Any], event: ModelRequested, state: RunState) -> Span:
    provider, model = model_of(state.spec)
    model = event.model or model
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": env.run_id,
        "agentledger.turn": event.turn,
        "agentledger.attempt": event.attempt,
    }
    if event.context_tokens is not None:
        attributes["agentledger.context.tokens"] = event.context_tokens
    if event.context_hash:
        attributes["agentledger.context.hash"] = event.context_hash
    span_id = chat_span_id(env.run_id, event.turn, event.attempt)
    return _span(env, span_id, f"chat {model}", SpanKind.CLIENT, attributes)


def _reply_attributes(event: ModelResponded) -> dict[str, AttrValue]:
    return {
        "gen_ai.response.model": event.model,
        "gen_ai.response.finish_reasons": (event.stop_reason,),
        **usage_attributes(event.usage, "gen_ai.usage."),
    }


def usage_attributes(u: Usage, prefix: str) -> dict[str, AttrValue]:
    """Tokens as the GenAI conventions count them: `input_tokens` is every token of
    the prompt, those read from the cache and written to it included (Anthropic's own
    `input_tokens` counts only the rest), with the cached parts beside it — under the
    convention's current names (`cache_read.input_tokens`, what the SDK's own span
    writes) and under the names the issue asked for (`cache_read_input_tokens`)."""
    return {
        f"{prefix}input_tokens": prompt_tokens(u),
        f"{prefix}output_tokens": u.output_tokens,
        f"{prefix}cache_read.input_tokens": u.cache_read_input_tokens,
        f"{prefix}cache_creation.input_tokens": u.cache_creation_input_tokens,
        f"{prefix}cache_read_input_tokens": u.cache_read_input_tokens,
        f"{prefix}cache_creation_input_tokens": u.cache_creation_input_tokens,
    }


def prompt_tokens(u: Usage) -> int:
    return u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens


def _sampled_span(env: Envelope[Any], event: ToolSampledModel) -> Span:
    """A `chat` span for an MCP server's sampling request, a child of its call's span:
    recorded once answered, so it starts and ends at its event."""
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": event.model,
        "gen_ai.response.model": event.model,
        "gen_ai.response.finish_reasons": (event.stop_reason,),
        "agentledger.mcp.server": event.server,
        "agentledger.mcp.sample": event.sample,
        **usage_attributes(event.usage, "gen_ai.usage."),
    }
    span = _span(env, sampled_span_id(env.run_id, event.sample), f"chat {event.model}",
                 SpanKind.CLIENT, attributes)  # fmt: skip
    return replace(span, parent_id=tool_span_id(env.run_id, event.call_id), end=env.at,
                   end_seq=env.seq)  # fmt: skip


def _tool_span(env: Envelope[Any], event: ToolCallProposed) -> Span:
    attributes: dict[str, AttrValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": event.name,
        "gen_ai.tool.call.id": event.call_id,
        "gen_ai.tool.type": "function",
        "agentledger.turn": event.turn,
    }
    span_id = tool_span_id(env.run_id, event.call_id)
    return _span(env, span_id, f"execute_tool {event.name}", SpanKind.INTERNAL, attributes)


def _run_totals(state: RunState) -> dict[str, AttrValue]:
    """The run's totals, outside `gen_ai.usage.*`: a backend that adds up a trace's
    `gen_ai.usage.*` then counts each model call once (on its `chat` span)."""
    return {
        "agentledger.run.status": str(state.status),
        "agentledger.turns": state.turns_used,
        "agentledger.cost_usd": round(state.cost_usd, 6),
        **usage_attributes(state.usage, "agentledger.usage."),
    }


def _event_attributes(env: Envelope[Any]) -> dict[str, AttrValue]:
    """What a span event says about its log entry: its seq, and its main fields."""
    out: dict[str, AttrValue] = {"agentledger.seq": env.seq, "agentledger.source": env.source}
    return out | _call_fields(env.data) | _said_fields(env.data)


def _call_fields(e: Any) -> dict[str, AttrValue]:
    """The main fields of a tool call's and of acceptance's events."""
    match e:
        case ToolCallStarted():
            return {"agentledger.attempt": e.attempt, "agentledger.worker": e.worker}
        case ToolCallWaiting():
            return {"agentledger.waiting_for": tuple(e.waiting_for)}
        case ToolCallScheduled():
            return {"agentledger.locks": tuple(sorted(e.tokens))}
        case AcceptanceStarted():
            return {"agentledger.attempt": e.attempt}
        case AcceptanceChecked():
            return {"agentledger.check": e.check, "agentledger.passed": e.passed}
    return {}


def _said_fields(e: Any) -> dict[str, AttrValue]:
    """Who said what: a person's controls, the reasons a run waits or escalates."""
    match e:
        case ApprovalRequested():
            return {"agentledger.reason": e.reason}
        case ApprovalGranted() | ApprovalDenied() | RunResumed() | RunAborted() | HumanReplied():
            return {"agentledger.by": e.by} | _publisher(e.publisher)
        case RunCancelRequested():
            said: dict[str, AttrValue] = {"agentledger.by": e.by, "agentledger.reason": e.reason}
            return said | _publisher(e.publisher)
        case AcceptanceFailed():
            return {"agentledger.feedback": e.feedback}
        case RunEscalated():
            return {"agentledger.reason": e.reason, "agentledger.detail": e.detail}
    return {}


def _publisher(name: str | None) -> dict[str, AttrValue]:
    """The inbox publisher that signed a control, when one did."""
    return {"agentledger.publisher": name} if name else {}


def by_parent(spans: Sequence[Span]) -> dict[str | None, list[Span]]:
    """The spans under each parent id, in the order they started."""
    tree: dict[str | None, list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.start_seq):
        tree.setdefault(span.parent_id, []).append(span)
    return tree
