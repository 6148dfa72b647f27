"""Snapshots as data: a folded state written as plain records (through the msgpack
codec by the shell), versioned like events, and bounded in size. A snapshot is
a cache of the fold, never the truth: it is used only while the log still holds
the event it was folded up to.

What a snapshot holds: a header — every scalar of the state and the current
turn — and the past turns by reference, in pages of PAGE_TURNS turns. A full
page never changes, so it is written once and the header names how many there
are; the spec is the run's RunCreated and is stored once, beside them. The
past turns after the last full page ride in the header, packed apart (version
2), so that writing the header does not encode them again. Restoring is pure:
the shell reads the header, the full pages it names (`full_pages`) and the tail
turns, and hands all of them to `restore` — a restored state holds its whole
past, so no decision on it can read anything."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from pydantic import TypeAdapter

from agentledger.events.flow_state import flow_of_record, flow_record
from agentledger.events.history import History
from agentledger.events.state import Call, Check, RunState, Turn
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import Overflow, ToolError
from agentledger.schemas.content import ContentBlock, Usage
from agentledger.schemas.spec import RunSpec

VERSION = 4  # 2: the tail turns are read on demand, as the pages are; 3: the escalation
# a person's answer must name, and the run's publisher (a version-2 record has neither:
# it is folded past, never read as if the run waited on no escalation); 4: when the
# turn's first model request was made (the start of its retry bound)
PAGE_TURNS = 16
Record = dict[str, Any]
Upgrade = Callable[[Record], Record]
UPGRADES: Mapping[int, Upgrade] = {}  # version v -> its record as version v + 1 reads it


@cache
def _block() -> TypeAdapter[ContentBlock]:
    """Built at the first snapshot read or by `prepare`, not at import: every CLI
    command imports this."""
    return TypeAdapter(ContentBlock)


def prepare() -> None:
    """Build what reading a snapshot needs now: a worker calls this before its
    threads start, so its first load of a run is not the one that builds it."""
    _block()


_SCALARS = (
    "run_id", "workspace", "created_at", "base_dir", "request_id", "queue", "toolset", "seq",
    "last_event_id", "updated_at", "cost_usd", "counting_from_turn", "cancel_requested_at",
    "cancel_by", "model_attempts", "model_claim_deadline", "model_first_attempt_at",
    "model_failed_attempt", "acceptance_attempts", "acceptance_claim_deadline", "detail", "escalated_for", "escalation", "publisher",
)  # fmt: skip
_CALL_PLAIN = tuple(
    f
    for f in Call.__dataclass_fields__
    if f not in ("status", "reads", "writes", "limits", "slot_holders", "backed_off_until")
    and f not in ("error", "claimed_by", "overflow", "waited_at")
)


class SnapshotError(ValueError):
    """A snapshot record this code cannot read (a newer version, a broken record)."""


def header(s: RunState) -> Record:
    """Everything of the state but the spec and the past turns' content."""
    record: Record = {f: getattr(s, f) for f in _SCALARS}
    record.update(
        v=VERSION,
        status=str(s.status),
        turns=len(s.history),
        current_turn=turn_record(s.current_turn) if s.current_turn else None,
        usage=s.usage.model_dump(),
        checks=[_check(c) for c in s.checks],
    )
    if s.failed_acceptance is not None:
        record["failed_acceptance"] = s.failed_acceptance
    if s.samples:
        record["samples"] = s.samples
    if s.clock_from is not None:  # a run that was held: its wall clock starts at its release
        record["clock_from"] = s.clock_from
    if s.flow is not None:  # a flow's own run: where its stages are
        record["flow"] = flow_record(s.flow)
    if s.parent_run_id is not None:  # a flow's child
        record["parent_run_id"] = s.parent_run_id
        record["stage"] = s.stage
    return record


def page_turns(s: RunState, *, first: int) -> dict[int, list[Turn]]:
    """The full pages of the state's past turns from page `first` on."""
    full = len(s.history) // PAGE_TURNS
    return {
        p: [s.history.item(i) for i in range(p * PAGE_TURNS, (p + 1) * PAGE_TURNS)]
        for p in range(first, full)
    }


def tail_of(s: RunState) -> list[Turn]:
    """The past turns after the last full page (they ride in the header, packed apart)."""
    start = len(s.history) // PAGE_TURNS * PAGE_TURNS
    return [s.history.item(i) for i in range(start, len(s.history))]


def pages(s: RunState, *, first: int) -> dict[int, list[Record]]:
    """`page_turns` as records."""
    return {p: [turn_record(t) for t in turns] for p, turns in page_turns(s, first=first).items()}


def tail_turns(s: RunState) -> list[Record]:
    """`tail_of` as records."""
    return [turn_record(t) for t in tail_of(s)]


def full_pages(record: Record) -> int:
    """How many full pages of past turns the header's state has (read before `restore`)."""
    return int(record["turns"]) // PAGE_TURNS


def restore(
    record: Record,
    *,
    spec: RunSpec,
    pages: Sequence[Sequence[Record]],
    tail: Sequence[Record],
) -> RunState:
    """The state a header stands for, with its past turns: the first `full_pages`
    pages (`pages`) and the turns after them (`tail`, as `tail_turns` wrote them)."""
    record = _upgraded(record)
    turns = int(record["turns"])
    full = turns // PAGE_TURNS
    if len(tail) != turns - full * PAGE_TURNS:
        raise SnapshotError(
            f"{len(tail)} turns after {full} pages, not {turns - full * PAGE_TURNS}"
        )
    if len(pages) != full:
        raise SnapshotError(f"{len(pages)} pages of {full}")
    history: History[Turn] = History([_turn_of(t) for page in [*pages, tail] for t in page])
    current = record["current_turn"]
    return RunState(
        **{f: record[f] for f in _SCALARS},
        status=RunStatus(record["status"]),
        spec=spec,
        history=history,
        current_turn=_turn_of(current) if current is not None else None,
        usage=Usage.model_validate(record["usage"]),
        checks=tuple(Check(**c) for c in record["checks"]),
        failed_acceptance=record.get(
            "failed_acceptance"
        ),  # added within version 3: older hold none
        samples=int(record.get("samples", 0)),  # added within version 4: older hold none
        clock_from=record.get("clock_from"),  # added within version 4: no older run was held
        # added within version 4: no older run was a flow's or a flow's child
        flow=flow_of_record(record["flow"]) if record.get("flow") is not None else None,
        parent_run_id=record.get("parent_run_id"),
        stage=record.get("stage"),
    )


def _upgraded(record: Record) -> Record:
    v = int(record.get("v", 0))
    if v > VERSION:
        raise SnapshotError(f"snapshot version {v} is newer than this reader knows ({VERSION})")
    while v < VERSION:
        step = UPGRADES.get(v)
        if step is None:
            raise SnapshotError(f"no upgrade from snapshot version {v}")
        record, v = step(record), v + 1
    return record


def turn_record(t: Turn) -> Record:
    """A past turn as a record (the same for as long as the turn is kept)."""
    return {
        "index": t.index,
        "content": [b.model_dump(mode="json") for b in t.content],
        "stop_reason": t.stop_reason,
        "model": t.model,
        "calls": [_call(c) for c in t.calls],
        "feedback": t.feedback,
    }


def _turn_of(r: Record) -> Turn:
    return Turn(
        index=r["index"],
        content=tuple(_block().validate_python(b) for b in r["content"]),
        stop_reason=r["stop_reason"],
        model=r["model"],
        calls=tuple(_call_of(c) for c in r["calls"]),
        feedback=r["feedback"],
    )


def _call(c: Call) -> Record:
    record: Record = {f: getattr(c, f) for f in _CALL_PLAIN}
    record.update(
        status=str(c.status),
        reads=list(c.reads),
        writes=list(c.writes),
        limits=[list(kv) for kv in c.limits],
        slot_holders=[list(kv) for kv in c.slot_holders],
        backed_off_until=c.backed_off_until,
        error=c.error.model_dump(mode="json") if c.error else None,
        claimed_by=c.claimed_by,
        waited_at=c.waited_at,
    )
    if c.overflow is not None:
        record["overflow"] = c.overflow.model_dump(mode="json")
    return record


def _call_of(r: Record) -> Call:
    return Call(
        **{f: r[f] for f in _CALL_PLAIN},
        status=CallStatus(r["status"]),
        reads=tuple(r["reads"]),
        writes=tuple(r["writes"]),
        limits=tuple((k, int(m)) for k, m in r.get("limits", ())),  # added within version 2
        slot_holders=tuple((k, int(n)) for k, n in r.get("slot_holders", ())),  # as well
        backed_off_until=r.get("backed_off_until"),  # as well
        error=ToolError.model_validate(r["error"]) if r["error"] else None,
        claimed_by=r.get("claimed_by"),  # added within version 2: older records hold none
        overflow=Overflow.model_validate(r["overflow"]) if r.get("overflow") else None,  # as well
        waited_at=r.get("waited_at"),  # added within version 4: older records hold none
    )


def _check(c: Check) -> Record:
    return {f: getattr(c, f) for f in Check.__dataclass_fields__}
