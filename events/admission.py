"""The intake's decisions on a batch of run requests, on what Redis answered
(`agentledger.services.loops.intake_batch` asks them): which run a request id names once its
claim was tried, whether a run found at a request's id is that request's own
(created before, by an intake that died before acknowledging it), and how a
batch's entries are taken in turn (run requests together, each control alone
after the runs requested before it exist)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentledger.events.grants import REPLAYED


@dataclass(frozen=True, slots=True)
class Claimed:
    """A request id's claim: the run it names (None: refused, `reason` says why)."""

    run_id: str | None
    reason: str | None = None


def claim_value(run_id: str, digest: str) -> str:
    """What a request id's key holds: the run it names and the request's digest."""
    return f"{run_id} {digest}"


def request_claim(kept: str | None, *, run_id: str, digest: str, request_id: str) -> Claimed:
    """The run a request id names, given what its key held when this request tried to
    claim it for `run_id` (None: nothing, and now it names `run_id`). The same request
    again (its digest) names the run it named before, created or being created; another
    request under the same id is refused as replayed."""
    if kept is None:
        return Claimed(run_id)
    named, _, held = kept.partition(" ")
    if held == digest and " " not in held:
        return Claimed(named)
    return Claimed(
        None,
        f"{REPLAYED}: request_id {request_id!r} names run {named!r} already, for another request",
    )


def own_run(
    found: tuple[str | None, str | None] | None, *, request_id: str | None, publisher: str
) -> bool:
    """A run that exists at the id a request would create is the request's own (its
    creation is a no-op) when it was created for this publisher's same request id;
    `found` is that run's (request id, publisher), None when it cannot be read."""
    return request_id is not None and found == (request_id, publisher)


def turns(is_control: Sequence[bool]) -> list[tuple[int, int]]:
    """The batch's entries (True: a control) as the spans [start, end) handled in
    turn: each span of run requests together, each control alone. A control may
    name a run requested before it in the batch: that run exists before it is read."""
    spans: list[tuple[int, int]] = []
    start = 0
    for i, control in enumerate(is_control):
        if control:
            if start < i:
                spans.append((start, i))
            spans.append((i, i + 1))
            start = i + 1
    if start < len(is_control):
        spans.append((start, len(is_control)))
    return spans


def by_tenant(tenants: Sequence[str]) -> list[int]:
    """The order run requests (by their tenants, in arrival order) are admitted in:
    round-robin across tenants — each tenant's k-th before any tenant's (k+1)-th,
    tenants in the order they first appear — each tenant's in arrival order."""
    own: dict[str, list[int]] = {}
    for i, tenant in enumerate(tenants):
        own.setdefault(tenant, []).append(i)
    order: list[int] = []
    for k in range(max((len(q) for q in own.values()), default=0)):
        order += [q[k] for q in own.values() if k < len(q)]
    return order


def window_order(entries: Sequence[tuple[bool, str]]) -> list[int]:
    """The order a window of inbox entries (each: whether it is a control, and whose
    it is — its stream's publisher and the tenant its request names) is handled in:
    each control where it stands (a control may name a run requested before it), the
    run requests between two controls round-robin by whose they are (`by_tenant`).
    So one tenant's backlog in a stream holds another's request behind one chunk of
    the window, not behind the backlog."""
    out: list[int] = []
    for start, end in turns([control for control, _ in entries]):
        if entries[start][0]:
            out.append(start)
            continue
        out += [start + i for i in by_tenant([whose for _, whose in entries[start:end]])]
    return out


def chunk_spans(n: int, *, first: int, size: int) -> list[tuple[int, int]]:
    """A window of `n` entries in their order as the spans [start, end) handled one
    after another: all at once when they are at most `size`; else the first as long
    as `first` (the senders in the window: each one's first request, with nothing of
    anyone's second before it), at most `size`, then `size` each."""
    size = max(1, size)
    if n <= size:
        return [(0, n)] if n else []
    head = max(1, min(first, size))
    spans = [(0, min(head, n))] if n else []
    spans += [(s, min(s + size, n)) for s in range(head, n, size)]
    return spans
