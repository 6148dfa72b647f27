"""The context view: what the model is shown at a turn, assembled from the
folded run under the spec's token budget (`context`). The log keeps every
message in full; the view is derived from it and never stored.

The view holds the system rules, the tool list (ours and the provider's server
tools), the task and the turns. A turn's assistant content and the results
answering it are one unit, so a tool_use is never separated from its
tool_result. Each unit is rendered (redacted: secrets in every block but the
signed and the provider's, which go back verbatim), serialised and hashed once,
and the view's hash is a chain — the hash of the head, then of each unit after
the one before — so a request at turn 200 costs what one at turn 2 does; the
previous request's build is kept and extended.

A refused turn leaves the view (the log keeps it; the decision `withdrawn` says
so) before the run goes on; a thinking block without a signature is never sent.

Under budget the view is the whole conversation and only ever grows at its end,
so the provider's prompt cache can be reused request after request. Over budget
it shortens the tool results of older turns (all but `keep_recent_turns`) to a
preview and a marker, then leaves out the oldest turns whole — both in steps of
`STEP_TURNS` turns, chosen from the state alone (so any turn's view can be
rebuilt from the log), which rewrite the prefix rarely.

Tokens are estimated at 4 characters a token of the view's canonical JSON; the
chained sha256 and the decisions go into `ModelRequested`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from events.conversation import add_message, user_reply
from events.history import History
from events.memo import IdentityMemo, Memo
from events.output_cap import READ_TOOL
from events.redact import Redactor
from events.state import RunState, Turn
from events.types import ModelRequested
from schemas.content import ContentBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, to_api
from schemas.context import ContextDecision
from schemas.spec import AnthropicModel, ToolSpec

CHARS_PER_TOKEN = 4
MIN_CUT_CHARS = 100  # a result that would lose fewer characters is left whole
OMITTED_RESERVE = 300  # room for the marker naming the turns left out
STEP_TURNS = 8  # turns shortened or left out at once when the budget forces it
WRAPPER_CHARS = 64  # a unit's two messages' JSON around their blocks: sizes are upper bounds


@dataclass(frozen=True, slots=True)
class ContextView:
    system: str | None
    tools: tuple[ToolSpec, ...]
    messages: tuple[Message, ...]
    decisions: tuple[ContextDecision, ...]
    budget_tokens: int
    chars: int  # of the canonical JSON of the head and every unit
    digest: str  # the chained sha256
    server_tools: tuple[dict[str, Any], ...] = ()

    @property
    def tokens(self) -> int:
        return -(-self.chars // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class _Unit:
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


def assemble(
    s: RunState, tools: Sequence[ToolSpec] = (), redactor: Redactor | None = None
) -> ContextView:
    r = redactor or Redactor()
    ctx = s.spec.context
    limit = ctx.budget_tokens * CHARS_PER_TOKEN
    system = r.text(s.spec.system) if s.spec.system else None
    task = TextBlock(text=r.text(s.spec.task))
    server = server_tools(s)
    past = _past(s.run_id, s.history, r)
    cur = (_unit(s.current_turn, r),) if s.current_turn is not None else ()
    older = max(0, len(past.raw) + len(cur) - ctx.keep_recent_turns)  # all in the history
    head_text = _head(system, tools, server, (task,))
    total = len(head_text) + past.raw_sum[-1] + sum(u.size for u in cur)
    past, k, m = _fit(s.run_id, past, older, total, limit, ctx.preview_chars)
    omitted = _omitted(past, k, m, ctx.budget_tokens)
    units = (*past.short[m:k], *past.raw[max(m, k) :], *cur)
    first = (task, *([omitted[1]] if omitted else []))
    if omitted:  # the head names what was left out; otherwise it is the one just made
        head_text = _head(system, tools, server, first)
    messages, digest = _build(s.run_id, head_text, first, units, (past.root, k, m, len(past.raw)))
    chars = len(head_text) + sum(u.size for u in cur) + _sent(past, k, m)
    refused = (*past.refused, *(u.turn.index for u in cur if u.withdrawn))
    decisions = (
        _withdrawn(refused),
        omitted[0] if omitted else None,
        _shortened(past, k, m),
        _over_budget(units, chars, limit),
    )  # fmt: skip
    return ContextView(
        system=system,
        tools=tuple(tools),
        messages=messages,
        decisions=tuple(d for d in decisions if d is not None),
        budget_tokens=ctx.budget_tokens,
        chars=chars,
        digest=digest,
        server_tools=server,
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


def server_tools(s: RunState) -> tuple[dict[str, Any], ...]:
    """The provider's tools the spec asks for, as the API defines them."""
    model = s.spec.model
    if not isinstance(model, AnthropicModel):
        return ()
    return tuple(t.definition() for t in model.anthropic.server_tools)


def canonical(system: str | None, tools: Sequence[ToolSpec], messages: Sequence[Message]) -> str:
    """A request as one canonical JSON text (for people: `agentledger context --json`)."""
    return _json(
        {
            "system": system,
            "tools": [tool_definition(t) for t in tools],
            "messages": [
                {"role": m.role, "content": [to_api(b) for b in m.content]} for m in messages
            ],
        }
    )


def tool_definition(t: ToolSpec) -> dict[str, Any]:
    return {"name": t.name, "description": t.description, "input_schema": t.input_schema}


def _head(
    system: str | None,
    tools: Sequence[ToolSpec],
    server: Sequence[dict[str, Any]],
    first: Sequence[ContentBlock],
) -> str:
    value: dict[str, Any] = {"system": system, "tools": [tool_definition(t) for t in tools]}
    if server:
        value["server_tools"] = list(server)
    value["first"] = [to_api(b) for b in first]
    return _json(value)


def _unit(turn: Turn, r: Redactor) -> _Unit:
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
    unit = _make(turn, assistant, user)
    _UNITS.put(turn, r, unit, unit.size)
    return unit


def _sendable(b: ContentBlock) -> bool:
    """A thinking block cut off before its signature is never sent back."""
    return not (isinstance(b, ThinkingBlock) and not b.signature)


def _make(
    turn: Turn,
    assistant: tuple[ContentBlock, ...],
    user: tuple[ContentBlock, ...],
    cut: tuple[int, int, int] = (0, 0, 0),
) -> _Unit:
    text = _json([[to_api(b) for b in assistant], [to_api(b) for b in user]])
    digest = hashlib.sha256(text.encode()).hexdigest()
    return _Unit(turn, assistant, user, len(text) + WRAPPER_CHARS, digest, cut)


_CACHE_MAX = 8192  # units
_CHARS_MAX = 4 << 20  # of the units kept in each of _UNITS and _SHORT (their JSON's characters)
_RUNS_MAX = 256  # runs whose past and last build are kept: a worker drives few at a time
_UNITS: IdentityMemo[Turn, _Unit] = IdentityMemo(_CACHE_MAX, _CHARS_MAX)  # by turn, redactor
_SHORT: IdentityMemo[_Unit, _Unit] = IdentityMemo(_CACHE_MAX, _CHARS_MAX)  # by unit, preview


def forget(run_id: str) -> None:
    """Let go of a run's past and last build (its state left this process's cache)."""
    _PAST.pop(run_id)
    _BUILT.pop(run_id)


def _short_unit(u: _Unit, preview: int) -> _Unit:
    """The unit with every tool result cut to a preview (itself when none is long)."""
    hit = _SHORT.get(u, preview)
    if hit is not None:
        return hit
    blocks, items, before, after = list(u.user), 0, 0, 0
    for j, b in enumerate(blocks):
        if isinstance(b, ToolResultBlock) and (short := _short(b, u.turn, preview)) is not None:
            blocks[j], items = short, items + 1
            before, after = before + len(b.content), after + len(short.content)
    out = _make(u.turn, u.assistant, tuple(blocks), (items, before, after)) if items else u
    _SHORT.put(u, preview, out, out.size)
    return out


def _choices(older: int) -> list[tuple[int, int]]:
    """(turns shortened, turns left out) to try, in order, for a view over budget.
    Whole steps of turns first, so the choice stays put as turns come and the
    prefix is rewritten seldom; when no step is enough, every older turn is
    shortened (only the turn that just became older changes) and whole steps of
    the oldest are left out. Each count only grows as the run does."""
    steps = [0, *range(STEP_TURNS, older + 1, STEP_TURNS)]
    out = [*((k, 0) for k in steps), (older, 0), *((older, m) for m in steps[1:]), (older, older)]
    return list(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class _Past:
    """A run's past turns rendered, with prefix sums of their sizes, kept from one
    request to the next and extended by the turns added since (the history is
    append-only and shared between states, so `extends` is O(1)). `short` holds
    the first turns with their results cut to a preview, as far as ever needed."""

    history: History[Turn]
    redactor: Redactor
    raw: tuple[_Unit, ...]
    raw_sum: tuple[int, ...]  # raw_sum[i]: size of raw[:i]
    refused: tuple[int, ...]  # turn indexes of refused turns
    root: object  # the same from one extension to the next: the units are the same objects
    preview: int = -1
    short: tuple[_Unit, ...] = ()
    short_sum: tuple[int, ...] = (0,)


_PAST: Memo[str, _Past] = Memo(_RUNS_MAX)


def _past(run_id: str, history: History[Turn], r: Redactor) -> _Past:
    old = _PAST.get(run_id)
    if old is not None and old.redactor == r and history.extends(old.history):
        if len(old.history) == len(history):
            return old
        raw, sums, refused = list(old.raw), list(old.raw_sum), list(old.refused)
        past = old
    else:
        raw, sums, refused, past = [], [0], [], None
    for i in range(len(raw), len(history)):
        u = _unit(history.item(i), r)
        raw.append(u)
        sums.append(sums[-1] + u.size)
        if u.withdrawn:
            refused.append(u.turn.index)
    root = past.root if past is not None else object()
    new = _Past(history, r, tuple(raw), tuple(sums), tuple(refused), root)
    if past is not None:
        new = replace(new, preview=past.preview, short=past.short, short_sum=past.short_sum)
    _PAST.put(run_id, new)
    return new


def _shortened_to(run_id: str, past: _Past, k: int, preview: int) -> _Past:
    """The past with (at least) its first k turns' results shortened."""
    if past.preview != preview:
        past = replace(past, preview=preview, short=(), short_sum=(0,))
    if len(past.short) >= k:
        return past
    short, sums = list(past.short), list(past.short_sum)
    for u in past.raw[len(short) : k]:
        short.append(_short_unit(u, preview))
        sums.append(sums[-1] + short[-1].size)
    past = replace(past, short=tuple(short), short_sum=tuple(sums))
    _PAST.put(run_id, past)
    return past


def _fit(
    run_id: str, past: _Past, older: int, total: int, limit: int, preview: int
) -> tuple[_Past, int, int]:
    """(the past, turns shortened, turns left out) that bring the view within its
    budget; the recent turns are sent whole whatever it costs (`over_budget`)."""
    if total <= limit:
        return past, 0, 0
    for k, m in _choices(older):
        past = _shortened_to(run_id, past, k, preview)
        size = total - (past.raw_sum[k] - past.short_sum[k]) - _dropped(past, k, m)
        if size + (OMITTED_RESERVE if m else 0) <= limit:
            return past, k, m
    return past, k, m


def _dropped(past: _Past, k: int, m: int) -> int:
    """The size of the first m turns, shortened below k."""
    return past.short_sum[min(m, k)] + max(0, past.raw_sum[m] - past.raw_sum[k])


def _sent(past: _Past, k: int, m: int) -> int:
    """The size of the past turns sent: shortened below k, left out below m."""
    short = past.short_sum[k] - past.short_sum[min(m, k)]
    return short + past.raw_sum[-1] - past.raw_sum[max(m, k)]


def _omitted(past: _Past, k: int, m: int, budget: int) -> tuple[ContextDecision, TextBlock] | None:
    """The marker after the task naming the turns left out, and the decision."""
    if m == 0:
        return None
    first, last, dropped = past.raw[0].turn.index, past.raw[m - 1].turn.index, _dropped(past, k, m)
    note = TextBlock(
        text=f"[omitted: turns {first}-{last} ({m} turns, {dropped:,} chars) to stay within "
        f"the context budget of {budget:,} tokens; the run log keeps them in full]"
    )
    decision = ContextDecision(
        action="omitted",
        first_turn=first,
        last_turn=last,
        items=m,
        chars_before=dropped,
        chars_after=len(_json(to_api(note))),
    )
    return decision, note


@dataclass(frozen=True, slots=True)
class _Built:
    """A view's messages and hash chain, kept so that the next request extends them."""

    head: str
    units: tuple[_Unit, ...]
    chain: tuple[str, ...]  # the hash after the head and after each unit
    messages: tuple[Message, ...]
    shape: tuple[object, int, int, int]  # the past's root, shortened, left out, past turns


_BUILT: Memo[str, _Built] = Memo(_RUNS_MAX)


def _build(
    run_id: str,
    head: str,
    first: tuple[ContentBlock, ...],
    units: tuple[_Unit, ...],
    shape: tuple[object, int, int, int],
) -> tuple[tuple[Message, ...], str]:
    """The messages and the chained hash, extending the run's previous build when
    it is a prefix of this one (the usual case: one more turn at the end)."""
    old = _BUILT.get(run_id)
    same = _common(old, head, units, shape) if old is not None else 0
    if old is not None and same == len(old.units):
        chain, out = list(old.chain), list(old.messages)
    else:
        chain = list(old.chain[: same + 1]) if old is not None and same else []
        chain = chain or [hashlib.sha256(head.encode()).hexdigest()]
        out = [Message(role="user", content=first)]
        for u in units[:same]:
            _add(out, u)
    for u in units[same:]:
        chain.append(hashlib.sha256(f"{chain[-1]}{u.digest}".encode()).hexdigest())
        _add(out, u)
    messages = tuple(out)
    _BUILT.put(run_id, _Built(head, units, tuple(chain), messages, shape))
    return messages, chain[-1]


def _common(
    old: _Built, head: str, units: tuple[_Unit, ...], shape: tuple[object, int, int, int]
) -> int:
    """How many leading units the previous build shares with this one. The same
    past (root), shortened and left out alike, shares all its past turns: only
    the few after them are compared."""
    if old.head != head:
        return 0
    root, k, m, _ = shape
    start = 0
    if old.shape[:3] == (root, k, m):
        start = min(old.shape[3] - m, len(old.units), len(units))
    n = min(len(old.units), len(units))
    return next((i for i in range(start, n) if old.units[i] is not units[i]), n)


def _add(out: list[Message], u: _Unit) -> None:
    add_message(out, "assistant", u.assistant)
    add_message(out, "user", u.user)


def _withdrawn(refused: Sequence[int]) -> ContextDecision | None:
    if not refused:
        return None
    return ContextDecision(
        action="withdrawn",
        first_turn=refused[0],
        last_turn=refused[-1],
        items=len(refused),
        chars_before=0,
        chars_after=0,
    )


def _shortened(past: _Past, k: int, m: int) -> ContextDecision | None:
    """What was shortened among the turns sent."""
    cut = [u for u in past.short[m:k] if u.cut[0]]
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


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
