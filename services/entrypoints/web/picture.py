"""A run's picture for the web view, as JSON-ready values: the waterfall
(`agentledger.events.waterfall`: bars on lanes, their segments, durations,
tokens and cost, the log entries each stands for) and the conversation turn by
turn (the model's blocks as it sent them, then each tool call's input and
result). Everything passes the run's redactor."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentledger.events.spans import Span, SpanBuilder
from agentledger.events.state import RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import ModelResponded, RunCreated
from agentledger.events.waterfall import Bar, Waterfall, waterfall, waterfall_of
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.spec import Price
from agentledger.services.adapters.live_text import LiveText, Said
from agentledger.services.secrets import redactor_for

DRAW_EVERY_S = 1.0  # a live run's picture at most this often while its events come


class LivePicture:
    """A run's picture as its log grows: its spans built as events come
    (`SpanBuilder`, one fold step an event), so drawing it again does not fold
    the whole log again."""

    def __init__(
        self, every_s: float = DRAW_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every_s, self._clock = every_s, clock
        self._drawn_at: float | None = None
        self._undrawn = False
        self._builder = SpanBuilder()
        self._ended: list[Span] = []
        self._replies: dict[int, ModelResponded] = {}
        self._prices: Mapping[str, Price] = {}

    def add(self, envelopes: Sequence[Envelope[Any]]) -> None:
        self._undrawn = self._undrawn or bool(envelopes)
        for env in envelopes:
            self._ended += self._builder.add(env)
            if isinstance(env.data, ModelResponded):
                self._replies[env.seq] = env.data
            elif isinstance(env.data, RunCreated):
                self._prices = env.data.spec.budgets.prices

    def due(self, state: RunState, idle: bool) -> dict[str, Any] | None:
        """The picture when it is due — the first, then at most one every `every_s`
        while events come, and the last as soon as they stop or the run ends —
        else None (a run of many events is not drawn for each)."""
        if not self._undrawn:
            return None
        now = self._clock()
        waited = self._drawn_at is None or now - self._drawn_at >= self._every_s
        if not (waited or idle or state.status.terminal):
            return None
        self._drawn_at, self._undrawn = now, False
        return self.picture(state)

    def picture(self, state: RunState) -> dict[str, Any]:
        spans = sorted([*self._ended, *self._builder.open_spans()], key=lambda s: s.start_seq)
        return _shown(state, waterfall_of(spans, self._replies, self._prices))


class TextSoFar:
    """What a model has said so far of the reply a run waits for, when its worker
    streams it (`agentledger.services.adapters.live_text`): news only when it moved."""

    def __init__(self, source: LiveText | None) -> None:
        self._source = source
        self._last: Said | None = None

    def news(self, run_id: str, state: RunState) -> dict[str, Any] | None:
        if self._source is None or state.status is not RunStatus.REQUESTING_MODEL:
            return None
        said = self._source.get(run_id)
        answered = max((t.index for t in state.turns), default=0)
        if said is None or said.turn <= answered or said == self._last:
            return None
        self._last = said
        return {"turn": said.turn, "attempt": said.attempt, "text": said.text}


def picture(state: RunState, envelopes: Sequence[Envelope[Any]]) -> dict[str, Any]:
    """`envelopes` is the run's whole log; `state` its fold."""
    return _shown(state, waterfall(envelopes))


def _shown(state: RunState, found: Waterfall | None) -> dict[str, Any]:
    """The picture, its every text through the run's redactor (the waterfall's by
    field: a walk over its numbers and keys took 0.2 s for 2,000 bars)."""
    redactor = redactor_for(state.spec)
    turns = {"task": state.spec.task, "turns": [_turn(t) for t in state.turns]}
    drawn = _waterfall(found, redactor.text) if found is not None else None
    return {"waterfall": drawn, **dict(redactor.value(turns))}


def _waterfall(w: Waterfall, said: Callable[[str], str]) -> dict[str, Any]:
    return {
        "start": w.start, "end": w.end, "lanes": list(w.lanes),
        "bars": [_bar(b, said) for b in w.bars],
        "marks": [{"at": m.at, "type": m.type, "seq": m.seq} for m in w.marks],
        "cost_usd": w.cost_usd,
    }  # fmt: skip


def _bar(b: Bar, said: Callable[[str], str]) -> dict[str, Any]:
    """A bar as JSON, its texts as `said` gives them (by hand: `dataclasses.asdict`
    took 0.3 s for 2,000 bars)."""
    segments = [
        {"phase": s.phase, "start": s.start, "end": s.end,
         "waiting_for": [said(r) for r in s.waiting_for]}
        for s in b.segments
    ]  # fmt: skip
    return {
        "key": b.key, "kind": str(b.kind), "label": said(b.label), "lane": b.lane,
        "start": b.start, "end": b.end, "duration_s": b.duration_s, "turn": b.turn,
        "seqs": list(b.seqs), "segments": segments,
        "error": None if b.error is None else said(b.error),
        "call_id": None if b.call_id is None else said(b.call_id), "cost_usd": b.cost_usd,
        "input_tokens": b.input_tokens, "output_tokens": b.output_tokens,
    }  # fmt: skip


def _turn(t: Turn) -> dict[str, Any]:
    return {
        "turn": t.index,
        "model": t.model,
        "stop_reason": t.stop_reason,
        "content": [b.model_dump(mode="json") for b in t.content],
        "calls": [
            {
                "call_id": c.call_id,
                "name": c.name,
                "input": c.input,
                "status": str(c.status),
                "output": c.output if c.status is CallStatus.SUCCEEDED else None,
                "error": c.error.message if c.error else None,
            }
            for c in t.calls
        ],  # fmt: skip
        "feedback": t.feedback,
    }
