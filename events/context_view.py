"""The context view: what the model is shown at a turn, assembled from the
folded run under the spec's token budget (`context`). The log keeps every
message in full; the view is derived from it and never stored.

The view holds the system rules, the tool list, the task and the turns. When
they do not fit the budget it first shortens the tool results of older turns
(all but the `keep_recent_turns` latest), oldest first, each to a preview and a
marker saying what was cut, how much and where the rest is; if that is not
enough it leaves out the oldest turns whole and says so after the task. A
turn's assistant content and the results answering it are one unit, so a
tool_use is never separated from its tool_result. Secrets are redacted in every
block but thinking blocks, which are signed and go back verbatim.

Tokens are estimated at 4 characters a token of the view's canonical JSON; the
sha256 of that JSON and the decisions go into `ModelRequested`, so the view of
any turn can be rebuilt from the log and checked."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from events.conversation import add_message, user_reply
from events.output_cap import READ_TOOL
from events.redact import Redactor
from events.state import RunState, Turn
from events.types import ModelRequested
from schemas.content import ContentBlock, Message, TextBlock, ToolResultBlock
from schemas.context import ContextDecision
from schemas.spec import ToolSpec

CHARS_PER_TOKEN = 4
WRAPPER_CHARS = 40  # a message's JSON around its blocks, counted for both sides of a turn
MIN_CUT_CHARS = 100  # a result that would lose fewer characters is left whole
OMITTED_RESERVE = 300  # room for the marker naming the turns left out


@dataclass(frozen=True, slots=True)
class ContextView:
    system: str | None
    tools: tuple[ToolSpec, ...]
    messages: tuple[Message, ...]
    decisions: tuple[ContextDecision, ...]
    budget_tokens: int
    chars: int  # of the canonical JSON
    digest: str  # its sha256

    @property
    def tokens(self) -> int:
        return -(-self.chars // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class _Unit:
    """One turn as the model sees it: the assistant content and the reply to it."""

    turn: Turn
    assistant: tuple[ContentBlock, ...]
    user: tuple[ContentBlock, ...]
    size: int  # an upper bound of its characters in the canonical JSON
    cut: tuple[int, int, int] = (0, 0, 0)  # results shortened, their chars before, after


def assemble(
    s: RunState, tools: Sequence[ToolSpec] = (), redactor: Redactor | None = None
) -> ContextView:
    r = redactor or Redactor()
    ctx = s.spec.context
    limit = ctx.budget_tokens * CHARS_PER_TOKEN
    system = r.text(s.spec.system) if s.spec.system else None
    task = TextBlock(text=r.text(s.spec.task))
    units = [_unit(t, r) for t in s.turns]
    older = max(0, len(units) - ctx.keep_recent_turns)
    head = canonical(system, tools, (Message(role="user", content=(task,)),))
    total = len(head) + sum(u.size for u in units)
    units, total = _shorten(units, older, total, limit, ctx.preview_chars)
    units, total, omitted, note = _omit(units, older, total, limit, ctx.budget_tokens)
    messages = _messages((task, *([note] if note else [])), units)
    text = canonical(system, tools, messages)
    decisions = (omitted, _shortened(units), _over_budget(units, len(text), limit))
    return ContextView(
        system=system,
        tools=tuple(tools),
        messages=messages,
        decisions=tuple(d for d in decisions if d is not None),
        budget_tokens=ctx.budget_tokens,
        chars=len(text),
        digest=hashlib.sha256(text.encode()).hexdigest(),
    )


def with_context(requested: ModelRequested, view: ContextView) -> ModelRequested:
    """The claim, recording what will be sent: enough to rebuild and check it."""
    return requested.model_copy(
        update={
            "context_hash": view.digest,
            "context_tokens": view.tokens,
            "context_decisions": view.decisions,
        }
    )


def canonical(system: str | None, tools: Sequence[ToolSpec], messages: Sequence[Message]) -> str:
    """The request as the model receives it, as one canonical JSON text."""
    return _json(
        {
            "system": system,
            "tools": [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in tools
            ],
            "messages": [m.model_dump(mode="json") for m in messages],
        }
    )


def _unit(turn: Turn, r: Redactor) -> _Unit:
    """A turn's redacted messages and size. Turns are frozen and a run's past turns
    are the same objects from one request to the next, so the work is remembered
    (a pure cache: the same turn and redactor always give the same unit)."""
    key = (id(turn), r)
    hit = _UNITS.get(key)
    if hit is not None and hit.turn is turn:
        return hit
    assistant = tuple(r.block(b) for b in turn.content)
    user = tuple(r.block(b) for b in user_reply(turn))
    unit = _Unit(turn, assistant, user, sum(map(_size, (*assistant, *user))) + 2 * WRAPPER_CHARS)
    if len(_UNITS) >= _UNITS_MAX:
        del _UNITS[next(iter(_UNITS))]  # the oldest entry
    _UNITS[key] = unit
    return unit


_UNITS: dict[tuple[int, Redactor], _Unit] = {}
_UNITS_MAX = 8192


def _shorten(
    units: list[_Unit], older: int, total: int, limit: int, preview: int
) -> tuple[list[_Unit], int]:
    """Cut older tool results, oldest first, until the view fits."""
    out = list(units)
    for i in range(older):
        blocks, saved, items, before, after = list(out[i].user), 0, 0, 0, 0
        for j, b in enumerate(blocks):
            if total - saved <= limit:
                break
            if not isinstance(b, ToolResultBlock):
                continue
            if (short := _short(b, out[i].turn, preview)) is not None:
                saved += _size(b) - _size(short)
                blocks[j], items = short, items + 1
                before, after = before + len(b.content), after + len(short.content)
        if items:
            cut = (items, before, after)
            out[i] = replace(out[i], user=tuple(blocks), size=out[i].size - saved, cut=cut)
            total -= saved
    return out, total


def _shortened(units: Sequence[_Unit]) -> ContextDecision | None:
    """What was shortened among the turns sent."""
    cut = [u for u in units if u.cut[0]]
    if not cut:
        return None
    return ContextDecision(
        action="shortened",
        first_turn=cut[0].turn.index,
        last_turn=cut[-1].turn.index,
        items=sum(u.cut[0] for u in cut),
        chars_before=sum(u.cut[1] for u in cut),
        chars_after=sum(u.cut[2] for u in cut),
    )


def _over_budget(units: Sequence[_Unit], chars: int, limit: int) -> ContextDecision | None:
    """The turns that must be sent whole do not fit: send them and say so."""
    if chars <= limit:
        return None
    first = units[0].turn.index if units else 0
    last = units[-1].turn.index if units else 0
    return ContextDecision(
        action="over_budget",
        first_turn=first,
        last_turn=last,
        chars_before=chars,
        chars_after=limit,
    )


def _short(b: ToolResultBlock, turn: Turn, preview: int) -> ToolResultBlock | None:
    content = b.content
    keep = content[:preview]
    cut = len(content) - len(keep)
    if cut < MIN_CUT_CHARS:
        return None
    call = turn.call(b.tool_use_id)
    name = call.name if call is not None else "?"
    note = (
        f"[cut: {cut:,} of {len(content):,} chars of the result of call {b.tool_use_id} "
        f"({name}, turn {turn.index}); the full result is in the run log: "
        f"{READ_TOOL}(ref={b.tool_use_id!r}) reads it]"
    )
    return b.model_copy(update={"content": f"{keep}\n{note}" if keep else note})


def _omit(
    units: list[_Unit], older: int, total: int, limit: int, budget: int
) -> tuple[list[_Unit], int, ContextDecision | None, TextBlock | None]:
    """Leave out the oldest turns whole until the view fits."""
    n = dropped = 0
    while n < older and total - dropped + OMITTED_RESERVE > limit:
        dropped += units[n].size
        n += 1
    if n == 0:
        return units, total, None, None
    first, last = units[0].turn.index, units[n - 1].turn.index
    note = TextBlock(
        text=f"[omitted: turns {first}-{last} ({n} turns, {dropped:,} chars) to stay within "
        f"the context budget of {budget:,} tokens; the run log keeps them in full]"
    )
    decision = ContextDecision(
        action="omitted",
        first_turn=first,
        last_turn=last,
        items=n,
        chars_before=dropped,
        chars_after=_size(note),
    )
    return units[n:], total - dropped + _size(note), decision, note


def _messages(task: tuple[ContentBlock, ...], units: Sequence[_Unit]) -> tuple[Message, ...]:
    out = [Message(role="user", content=task)]
    for u in units:
        add_message(out, "assistant", u.assistant)
        add_message(out, "user", u.user)
    return tuple(out)


def _size(b: ContentBlock) -> int:
    return len(b.model_dump_json())  # the length of its canonical JSON: same text, other key order


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
