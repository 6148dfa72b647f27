"""One step of a call, as the tools pool takes it (`DriveCall`): validate every
undecided call of the turn, record what the lock table said to the turn's lock
requests, and claim the call when it may run now — one batch, one append, no
hop between. The findings and the lock table's answers are gathered first; the
decision itself is pure and can be made again on a fresher state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agentledger.events.batch import chain, provisional
from agentledger.events.lock_step import (
    LockAsk,
    SlotLooks,
    lock_asks,
    record_locks,
    waiting_request,
)
from agentledger.events.locks import Grant
from agentledger.events.state import RunState
from agentledger.events.tool_step import claim_call
from agentledger.events.types import Event
from agentledger.events.validation_step import Finding, validate_turn


@dataclass(frozen=True, slots=True)
class LockAnswers:
    """The requests asked of the lock table in this step, and the ones it granted."""

    asked: tuple[LockAsk, ...] = ()
    grants: Mapping[str, Grant] = field(default_factory=dict)  # request id -> grant
    slots: SlotLooks = field(default_factory=dict)  # what the waiting asks' slot keys have


def validated(
    s: RunState, findings: Mapping[str, Finding], *, known_tools: Sequence[str], now: float
) -> RunState:
    """The state once the turn's undecided calls are validated (not appended)."""
    return provisional(s, validate_turn(s, findings, known_tools=known_tools, now=now), at=now)


def touches_resources(s: RunState, findings: Mapping[str, Finding]) -> bool:
    """Whether a call of the turn reads or writes a resource (as validated, or as the
    findings about its undecided calls say): else no lock is asked in this step."""
    turn = s.current_turn
    calls = turn.calls if turn is not None else ()
    return any(f.reads or f.writes or f.limits for f in findings.values()) or any(
        c.reads or c.writes or c.limits for c in calls
    )


def asks_for(s: RunState, call_id: str) -> list[LockAsk]:
    """What to ask the lock table in this step: every lock the turn still needs, in
    proposal order, or, for a call that waits, its own request again."""
    asks = lock_asks(s)
    if not asks and (waiting := waiting_request(s, call_id)) is not None:
        asks = [waiting]
    return asks


def drive_call(
    s: RunState,
    call_id: str,
    *,
    findings: Mapping[str, Finding],
    known_tools: Sequence[str],
    locks: LockAnswers,
    worker: str,
    now: float,
) -> list[Event]:
    return chain(
        s,
        (
            lambda x: validate_turn(x, findings, known_tools=known_tools, now=now),
            lambda x: record_locks(x, locks.asked, locks.grants, locks.slots),
            lambda x: claim_call(x, call_id, worker=worker, now=now),
        ),
        at=now,
    )
