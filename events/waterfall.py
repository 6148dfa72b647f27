"""A run as a picture (the web view's waterfall), laid out from its spans
(`agentledger.events.spans`): one bar per model request, per tool call and per
acceptance pass, on lanes — the model's lane, as many tool lanes as calls ran at
once (a call takes the first lane free when it is proposed), the acceptance
lane. A tool call's bar is cut into what it waited for and did: the approval
(asked → answered), the lock wait (queued → granted, naming the resources it
waited for) and the run itself (claimed → its outcome). A model bar carries its
tokens and cost (the run's prices, as the fold counts them). Every bar names the
log entries (seqs) it stands for, so a click can show them; people's controls
and escalations are marks on the run. Pure: times are the events' own; an open
bar (a live run) has no end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from agentledger.events.pricing import cost_usd, price_of
from agentledger.events.spans import Span, SpanEvent, spans_of
from agentledger.events.types import ModelResponded, RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import Price

MODEL_LANE = "model"
ACCEPTANCE_LANE = "acceptance"
# a tool call's steps that start a segment of its bar; any other step ends the current one
PHASE_OF = {
    "ApprovalRequested": "approval",
    "ToolCallWaiting": "lock_wait",
    "ToolCallStarted": "running",
}
# steps that change nothing a picture shows: the call goes on as it was
NEUTRAL = frozenset({"ToolCallLeaseExpired"})
MARKED = frozenset(
    {"RunCancelRequested", "RunEscalated", "HumanReplied", "RunResumed", "RunAborted"}
)


class BarKind(StrEnum):
    MODEL = "model"
    TOOL = "tool"
    ACCEPTANCE = "acceptance"


@dataclass(frozen=True, slots=True)
class Segment:
    phase: str  # approval | lock_wait | running | acceptance | model
    start: float
    end: float | None
    waiting_for: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Bar:
    key: str
    kind: BarKind
    label: str
    lane: int
    start: float
    end: float | None
    turn: int
    seqs: tuple[int, ...]
    segments: tuple[Segment, ...] = ()
    error: str | None = None
    call_id: str | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def duration_s(self) -> float | None:
        return None if self.end is None else self.end - self.start


@dataclass(frozen=True, slots=True)
class Mark:
    at: float
    type: str
    seq: int


@dataclass(frozen=True, slots=True)
class Waterfall:
    start: float
    end: float | None
    lanes: tuple[str, ...]
    bars: tuple[Bar, ...]
    marks: tuple[Mark, ...] = ()
    cost_usd: float = 0.0


def assign_lanes(intervals: Sequence[tuple[float, float | None]]) -> list[int]:
    """For intervals (start, end; None: still open), in the order given, the first
    lane whose last interval ended at or before this one's start: two intervals
    on one lane never overlap, and as few lanes are used as overlap needs (first
    fit over intervals sorted by start)."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], i))
    ends: list[float | None] = []  # per lane, where its last interval ends
    lanes = [0] * len(intervals)
    for i in order:
        start, end = intervals[i]
        free = [n for n, e in enumerate(ends) if e is not None and e <= start]
        lane = free[0] if free else len(ends)
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        lanes[i] = lane
    return lanes


def waterfall(envelopes: Sequence[Envelope[Any]]) -> Waterfall | None:
    """The picture of a run's log (None for an empty log)."""
    if not envelopes or not isinstance(created := envelopes[0].data, RunCreated):
        return None
    replies = {e.seq: e.data for e in envelopes if isinstance(e.data, ModelResponded)}
    return waterfall_of(spans_of(envelopes), replies, created.spec.budgets.prices)


def waterfall_of(
    spans: Sequence[Span], replies: Mapping[int, ModelResponded], prices: Mapping[str, Price]
) -> Waterfall | None:
    """The picture of a run's spans (`spans_of`, or a `SpanBuilder`'s so far), its
    model replies by seq and its prices; None without the run's own span."""
    root = next((s for s in spans if s.parent_id is None), None)
    if root is None:
        return None
    models = [
        _model_bar(s, replies.get(s.end_seq or -1), prices) for s in spans if _op(s) == "chat"
    ]
    tools = [_tool_bar(s) for s in spans if _op(s) == "execute_tool"]
    checks = _acceptance_bars(root)
    tool_lanes = assign_lanes([(b.start, b.end) for b in tools])
    width = max(tool_lanes, default=-1) + 1
    bars = [
        *(_on(b, 0) for b in models),
        *(_on(b, 1 + lane) for b, lane in zip(tools, tool_lanes, strict=True)),
        *(_on(b, 1 + width) for b in checks),
    ]
    lanes = (MODEL_LANE, *(f"tools {n + 1}" for n in range(width)), ACCEPTANCE_LANE)
    marks = tuple(Mark(e.at, e.name, _seq(e)) for e in root.events if e.name in MARKED)
    total = round(sum(b.cost_usd for b in models), 6)
    ordered = tuple(sorted(bars, key=lambda b: (b.start, b.seqs[:1])))
    return Waterfall(root.start, root.end, lanes, ordered, marks, total)


def _op(span: Span) -> object:
    return span.attributes.get("gen_ai.operation.name")


def _seq(event: SpanEvent) -> int:
    seq = event.attributes.get("agentledger.seq", 0)
    return seq if isinstance(seq, int) else 0


def _on(bar: Bar, lane: int) -> Bar:
    return replace(bar, lane=lane)


def _seqs(span: Span) -> tuple[int, ...]:
    found = {span.start_seq, *(_seq(e) for e in span.events)}
    if span.end_seq is not None:
        found.add(span.end_seq)
    return tuple(sorted(s for s in found if s))


def _turn(span: Span) -> int:
    turn = span.attributes.get("agentledger.turn", 0)
    return turn if isinstance(turn, int) else 0


def _model_bar(span: Span, reply: object, prices: Mapping[str, Price]) -> Bar:
    cost, tokens_in, tokens_out = 0.0, 0, 0
    if isinstance(reply, ModelResponded):
        u = reply.usage
        cost = cost_usd(u, price_of(reply.model, prices))
        tokens_in = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
        tokens_out = u.output_tokens
    segment = Segment("model", span.start, span.end)
    return Bar(span.span_id, BarKind.MODEL, span.name, 0, span.start, span.end, _turn(span),
               _seqs(span), (segment,), span.error, None, round(cost, 6), tokens_in,
               tokens_out)  # fmt: skip


def _tool_bar(span: Span) -> Bar:
    call_id = str(span.attributes.get("gen_ai.tool.call.id", ""))
    name = str(span.attributes.get("gen_ai.tool.name", ""))
    return Bar(span.span_id, BarKind.TOOL, f"{name} {call_id}", 0, span.start, span.end,
               _turn(span), _seqs(span), _segments(span), span.error, call_id)  # fmt: skip


def _segments(span: Span) -> tuple[Segment, ...]:
    """The call's approval, lock waits and runs, each from the step that began it to
    the next step that is not its own (the span's end for the last)."""
    done: list[Segment] = []
    phase, since = "", 0.0
    waited: tuple[str, ...] = ()
    for event in span.events:
        if event.name in NEUTRAL:
            continue
        now = PHASE_OF.get(event.name, "")
        if now == phase and now:
            waited = (*waited, *_waiting_for(event))
            continue
        if phase:
            done.append(Segment(phase, since, event.at, waited))
        phase, since, waited = now, event.at, _waiting_for(event)
    if phase:
        done.append(Segment(phase, since, span.end, waited))
    return tuple(done)


def _waiting_for(event: SpanEvent) -> tuple[str, ...]:
    found = event.attributes.get("agentledger.waiting_for", ())
    return tuple(found) if isinstance(found, tuple) else ()


def _acceptance_bars(root: Span) -> list[Bar]:
    """Each acceptance pass: from AcceptanceStarted through its checks to the step
    that ends it (AcceptanceFailed, the run's end, or whatever comes next)."""
    passes: list[list[SpanEvent]] = []
    ends: list[float | None] = []
    for event in root.events:
        if event.name == "AcceptanceStarted":
            if len(ends) < len(passes):
                ends.append(event.at)
            passes.append([event])
        elif len(ends) < len(passes):
            passes[-1].append(event)
            if not event.name.startswith("AcceptanceCheck"):
                ends.append(event.at)
    if len(ends) < len(passes):
        ends.append(root.end)
    return [
        _acceptance_bar(n, steps, end)
        for n, (steps, end) in enumerate(zip(passes, ends, strict=True), 1)
    ]


def _acceptance_bar(n: int, steps: list[SpanEvent], end: float | None) -> Bar:
    failed = any(e.name == "AcceptanceFailed" or e.attributes.get("agentledger.passed") is False
                 for e in steps)  # fmt: skip
    start = steps[0].at
    return Bar(f"acceptance-{n}", BarKind.ACCEPTANCE, f"acceptance {n}", 0, start, end, 0,
               tuple(_seq(e) for e in steps), (Segment("acceptance", start, end),),
               "a check failed" if failed else None)  # fmt: skip
