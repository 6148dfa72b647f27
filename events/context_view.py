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
chained sha256 and the decisions go into `ModelRequested`.

A turn's rendering and its caches live in `context_units`; the run's past and
the choice of what to shorten or leave out in `context_past`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.events import context_past
from agentledger.events.context_past import (
    RUNS_MAX,
    fit,
    omitted_marker,
    past_of,
    sent_size,
    shortened_decision,
)
from agentledger.events.context_units import Unit, canonical_json, unit_of
from agentledger.events.conversation import add_message
from agentledger.events.memo import Memo
from agentledger.events.redact import Redactor
from agentledger.events.state import RunState
from agentledger.events.types import ModelRequested
from agentledger.schemas.content import ContentBlock, Message, TextBlock, to_api
from agentledger.schemas.context import ContextDecision
from agentledger.schemas.spec import ToolSpec

CHARS_PER_TOKEN = 4


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


def assemble(
    s: RunState, tools: Sequence[ToolSpec] = (), redactor: Redactor | None = None
) -> ContextView:
    r = redactor or Redactor()
    ctx = s.spec.context
    limit = ctx.budget_tokens * CHARS_PER_TOKEN
    system = r.text(s.spec.system) if s.spec.system else None
    task = TextBlock(text=r.text(s.spec.task))
    server = server_tools(s)
    past = past_of(s.run_id, s.history, r)
    cur = (unit_of(s.current_turn, r),) if s.current_turn is not None else ()
    older = max(0, len(past.raw) + len(cur) - ctx.keep_recent_turns)  # all in the history
    head_text = _head(s.run_id, system, tools, server, (task,))
    total = len(head_text) + past.raw_sum[-1] + sum(u.size for u in cur)
    past, k, m = fit(s.run_id, past, older, total, limit, ctx.preview_chars)
    omitted = omitted_marker(past, k, m, ctx.budget_tokens)
    units = (*past.short[m:k], *past.raw[max(m, k) :], *cur)
    first = (task, *([omitted[1]] if omitted else []))
    if omitted:  # the head names what was left out; otherwise it is the one just made
        head_text = _head(s.run_id, system, tools, server, first)
    messages, digest = _build(s.run_id, head_text, first, units, (past.root, k, m, len(past.raw)))
    chars = len(head_text) + sum(u.size for u in cur) + sent_size(past, k, m)
    refused = (*past.refused, *(u.turn.index for u in cur if u.withdrawn))
    decisions = (
        _withdrawn(refused),
        omitted[0] if omitted else None,
        shortened_decision(past, k, m),
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
    return s.spec.model.server_tool_definitions()


def canonical(system: str | None, tools: Sequence[ToolSpec], messages: Sequence[Message]) -> str:
    """A request as one canonical JSON text (for people: `agentledger context --json`)."""
    return canonical_json(
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
    run_id: str,
    system: str | None,
    tools: Sequence[ToolSpec],
    server: Sequence[dict[str, Any]],
    first: Sequence[ContentBlock],
) -> str:
    """The canonical JSON of what comes before the turns: the text made for the run's
    last request when it is made of the same (the usual case: its tools' schemas are
    a kilobyte or more of JSON, the same at every turn)."""
    key = (system, tuple(tools), tuple(server), tuple(first))
    kept = _HEADS.get(run_id)
    if kept is not None and _same(kept[0], key):
        return kept[1]
    value: dict[str, Any] = {"system": system, "tools": [tool_definition(t) for t in tools]}
    if server:
        value["server_tools"] = list(server)
    value["first"] = [to_api(b) for b in first]
    text = canonical_json(value)
    _HEADS.put(run_id, (key, text))
    return text


_HeadKey = tuple[str | None, tuple[ToolSpec, ...], tuple[dict[str, Any], ...], tuple[Any, ...]]
_HEADS: Memo[str, tuple[_HeadKey, str]] = Memo(RUNS_MAX)


def _same(a: _HeadKey, b: _HeadKey) -> bool:
    """The same head: the same tool objects (or equal ones), system, server tools, blocks."""
    tools_a, tools_b = a[1], b[1]
    if len(tools_a) != len(tools_b) or not all(
        x is y or x == y for x, y in zip(tools_a, tools_b, strict=True)
    ):
        return False
    return a[0] == b[0] and a[2] == b[2] and a[3] == b[3]


def forget(run_id: str) -> None:
    """Let go of a run's past and last build (its state left this process's cache)."""
    context_past.forget(run_id)
    _BUILT.pop(run_id)
    _HEADS.pop(run_id)


@dataclass(frozen=True, slots=True)
class _Built:
    """A view's messages and hash chain, kept so that the next request extends them."""

    head: str
    units: tuple[Unit, ...]
    chain: tuple[str, ...]  # the hash after the head and after each unit
    messages: tuple[Message, ...]
    shape: tuple[object, int, int, int]  # the past's root, shortened, left out, past turns


_BUILT: Memo[str, _Built] = Memo(RUNS_MAX)


def _build(
    run_id: str,
    head: str,
    first: tuple[ContentBlock, ...],
    units: tuple[Unit, ...],
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
    old: _Built, head: str, units: tuple[Unit, ...], shape: tuple[object, int, int, int]
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


def _add(out: list[Message], u: Unit) -> None:
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


def _over_budget(units: Sequence[Unit], chars: int, limit: int) -> ContextDecision | None:
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
