"""A turn as the model sees it (`Unit`): its assistant content and the reply to
it, redacted, serialised and hashed once, and the same turn with its tool results
cut to a preview. Past turns are the same objects from one request to the next,
so the work is remembered in bounded caches (pure: the same turn and redactor
always give the same unit)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from agentledger.events.conversation import user_reply
from agentledger.events.memo import IdentityMemo
from agentledger.events.output_cap import READ_TOOL
from agentledger.events.redact import Redactor
from agentledger.events.state import Turn
from agentledger.schemas.content import (
    ContentBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    to_api,
)

MIN_CUT_CHARS = 100  # a result that would lose fewer characters is left whole
WRAPPER_CHARS = 64  # a unit's two messages' JSON around their blocks: sizes are upper bounds


@dataclass(frozen=True, slots=True)
class Unit:
    """One turn as the model sees it: the assistant content and the reply to it,
    with its canonical JSON's length and sha256."""

    turn: Turn
    assistant: tuple[ContentBlock, ...]
    user: tuple[ContentBlock, ...]
    size: int
    digest: str
    cut: tuple[int, int, int] = (0, 0, 0)  # results shortened, their chars before, after

    @property
    def withdrawn(self) -> bool:
        return self.turn.stop_reason == "refusal"


def unit_of(turn: Turn, r: Redactor) -> Unit:
    """A turn's redacted messages, size and hash. Turns are frozen and a run's past
    turns are the same objects from one request to the next, so the work is
    remembered (a pure cache: the same turn and redactor always give the same unit)."""
    hit = _UNITS.get(turn, r)
    if hit is not None:
        return hit
    if turn.stop_reason == "refusal":  # withdrawn: only what a person said afterwards stays
        assistant: tuple[ContentBlock, ...] = ()
        user: tuple[ContentBlock, ...] = (
            (TextBlock(text=r.text(turn.feedback)),) if turn.feedback else ()
        )
    else:
        assistant = tuple(r.block(b) for b in turn.content if _sendable(b))
        user = tuple(r.block(b) for b in user_reply(turn))
    unit = make_unit(turn, assistant, user)
    _UNITS.put(turn, r, unit, unit.size)
    return unit


def _sendable(b: ContentBlock) -> bool:
    """A thinking block cut off before its signature is never sent back."""
    return not (isinstance(b, ThinkingBlock) and not b.signature)


def make_unit(
    turn: Turn,
    assistant: tuple[ContentBlock, ...],
    user: tuple[ContentBlock, ...],
    cut: tuple[int, int, int] = (0, 0, 0),
) -> Unit:
    text = canonical_json([[to_api(b) for b in assistant], [to_api(b) for b in user]])
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Unit(turn, assistant, user, len(text) + WRAPPER_CHARS, digest, cut)


_CACHE_MAX = 8192  # units
_CHARS_MAX = 4 << 20  # of the units kept in each of _UNITS and _SHORT (their JSON's characters)
_UNITS: IdentityMemo[Turn, Unit] = IdentityMemo(_CACHE_MAX, _CHARS_MAX)  # by turn, redactor
_SHORT: IdentityMemo[Unit, Unit] = IdentityMemo(_CACHE_MAX, _CHARS_MAX)  # by unit, preview


def short_unit(u: Unit, preview: int) -> Unit:
    """The unit with every tool result cut to a preview (itself when none is long)."""
    hit = _SHORT.get(u, preview)
    if hit is not None:
        return hit
    blocks, items, before, after = list(u.user), 0, 0, 0
    for j, b in enumerate(blocks):
        if isinstance(b, ToolResultBlock) and (short := _short(b, u.turn, preview)) is not None:
            blocks[j], items = short, items + 1
            before, after = before + len(b.content), after + len(short.content)
    out = make_unit(u.turn, u.assistant, tuple(blocks), (items, before, after)) if items else u
    _SHORT.put(u, preview, out, out.size)
    return out


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


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
