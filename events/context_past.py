"""A run's past turns rendered (`Past`), kept from one request to the next and
extended by the turns added since, and the choice that brings a view over budget
within it: how many older turns are shortened to a preview and how many are left
out, in whole steps of `STEP_TURNS` turns, from the state alone."""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentledger.events.context_units import Unit, canonical_json, short_unit, unit_of
from agentledger.events.history import History
from agentledger.events.memo import Memo
from agentledger.events.redact import Redactor
from agentledger.events.state import Turn
from agentledger.schemas.content import TextBlock, to_api
from agentledger.schemas.context import ContextDecision

OMITTED_RESERVE = 300  # room for the marker naming the turns left out
STEP_TURNS = 8  # turns shortened or left out at once when the budget forces it
RUNS_MAX = 256  # runs whose past and last build are kept: a worker drives few at a time


def choices(older: int) -> list[tuple[int, int]]:
    """(turns shortened, turns left out) to try, in order, for a view over budget.
    Whole steps of turns first, so the choice stays put as turns come and the
    prefix is rewritten seldom; when no step is enough, every older turn is
    shortened (only the turn that just became older changes) and whole steps of
    the oldest are left out. Each count only grows as the run does."""
    steps = [0, *range(STEP_TURNS, older + 1, STEP_TURNS)]
    out = [*((k, 0) for k in steps), (older, 0), *((older, m) for m in steps[1:]), (older, older)]
    return list(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class Past:
    """A run's past turns rendered, with prefix sums of their sizes, kept from one
    request to the next and extended by the turns added since (the history is
    append-only and shared between states, so `extends` is O(1)). `short` holds
    the first turns with their results cut to a preview, as far as ever needed."""

    history: History[Turn]
    redactor: Redactor
    raw: tuple[Unit, ...]
    raw_sum: tuple[int, ...]  # raw_sum[i]: size of raw[:i]
    refused: tuple[int, ...]  # turn indexes of refused turns
    root: object  # the same from one extension to the next: the units are the same objects
    preview: int = -1
    short: tuple[Unit, ...] = ()
    short_sum: tuple[int, ...] = (0,)


_PAST: Memo[str, Past] = Memo(RUNS_MAX)


def past_of(run_id: str, history: History[Turn], r: Redactor) -> Past:
    old = _PAST.get(run_id)
    if old is not None and old.redactor == r and history.extends(old.history):
        if len(old.history) == len(history):
            return old
        raw, sums, refused = list(old.raw), list(old.raw_sum), list(old.refused)
        past = old
    else:
        raw, sums, refused, past = [], [0], [], None
    for i in range(len(raw), len(history)):
        u = unit_of(history.item(i), r)
        raw.append(u)
        sums.append(sums[-1] + u.size)
        if u.withdrawn:
            refused.append(u.turn.index)
    root = past.root if past is not None else object()
    new = Past(history, r, tuple(raw), tuple(sums), tuple(refused), root)
    if past is not None:
        new = replace(new, preview=past.preview, short=past.short, short_sum=past.short_sum)
    _PAST.put(run_id, new)
    return new


def forget(run_id: str) -> None:
    """Let go of a run's past (its state left this process's cache)."""
    _PAST.pop(run_id)


def shortened_to(run_id: str, past: Past, k: int, preview: int) -> Past:
    """The past with (at least) its first k turns' results shortened."""
    if past.preview != preview:
        past = replace(past, preview=preview, short=(), short_sum=(0,))
    if len(past.short) >= k:
        return past
    short, sums = list(past.short), list(past.short_sum)
    for u in past.raw[len(short) : k]:
        short.append(short_unit(u, preview))
        sums.append(sums[-1] + short[-1].size)
    past = replace(past, short=tuple(short), short_sum=tuple(sums))
    _PAST.put(run_id, past)
    return past


def fit(
    run_id: str, past: Past, older: int, total: int, limit: int, preview: int
) -> tuple[Past, int, int]:
    """(the past, turns shortened, turns left out) that bring the view within its
    budget; the recent turns are sent whole whatever it costs (`over_budget`)."""
    if total <= limit:
        return past, 0, 0
    for k, m in choices(older):
        past = shortened_to(run_id, past, k, preview)
        size = total - (past.raw_sum[k] - past.short_sum[k]) - dropped_size(past, k, m)
        if size + (OMITTED_RESERVE if m else 0) <= limit:
            return past, k, m
    return past, k, m


def dropped_size(past: Past, k: int, m: int) -> int:
    """The size of the first m turns, shortened below k."""
    return past.short_sum[min(m, k)] + max(0, past.raw_sum[m] - past.raw_sum[k])


def sent_size(past: Past, k: int, m: int) -> int:
    """The size of the past turns sent: shortened below k, left out below m."""
    short = past.short_sum[k] - past.short_sum[min(m, k)]
    return short + past.raw_sum[-1] - past.raw_sum[max(m, k)]


def omitted_marker(
    past: Past, k: int, m: int, budget: int
) -> tuple[ContextDecision, TextBlock] | None:
    """The marker after the task naming the turns left out, and the decision."""
    if m == 0:
        return None
    first, last, dropped = (
        past.raw[0].turn.index,
        past.raw[m - 1].turn.index,
        dropped_size(past, k, m),
    )
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
        chars_after=len(canonical_json(to_api(note))),
    )
    return decision, note


def shortened_decision(past: Past, k: int, m: int) -> ContextDecision | None:
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
