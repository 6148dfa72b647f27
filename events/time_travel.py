"""Where a run's workspace snapshots are in its log (issue 39): each write call's
snapshots from its recorded outcome, and the snapshot of the workspace as it was
before a given turn. Pure: the trees and blobs themselves are the shell's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentledger.events.acceptance_events import AcceptanceChecked, AcceptanceStarted
from agentledger.events.call_events import ToolCallFailed, ToolCallProposed, ToolCallSucceeded
from agentledger.events.event_model import Snapshots


@dataclass(frozen=True, slots=True)
class Written:
    """A call whose outcome carries its workspace's snapshots (its last outcome's), or
    an acceptance check that recorded the workspace it judged (`passed` not None; its
    id `check-A.I`: attempt A's check I, from 1)."""

    call_id: str
    turn: int
    name: str
    snapshots: Snapshots
    passed: bool | None = None


def check_id(attempt: int, index: int) -> str:
    return f"check-{attempt}.{index + 1}"


def written(events: Iterable[object]) -> list[Written]:
    """The snapshotted calls (in the order they were proposed) and checks (where they
    were recorded) of a run's events."""
    order: list[str] = []
    proposed: dict[str, ToolCallProposed] = {}
    found: dict[str, Snapshots] = {}
    checks: dict[str, Written] = {}
    turn = attempt = 0
    for e in events:
        turn = max(turn, getattr(e, "turn", 0) or 0)
        if isinstance(e, ToolCallProposed):
            proposed[e.call_id] = e
            order.append(e.call_id)
        elif isinstance(e, ToolCallSucceeded | ToolCallFailed) and e.snapshots is not None:
            found[e.call_id] = e.snapshots
        elif isinstance(e, AcceptanceStarted):
            attempt = e.attempt
        elif isinstance(e, AcceptanceChecked) and e.snapshots is not None:
            cid = check_id(attempt, e.index)
            checks[cid] = Written(cid, turn, e.check, e.snapshots, e.passed)
            order.append(cid)
    return [
        checks[i] if i in checks else Written(i, proposed[i].turn, proposed[i].name, found[i])
        for i in order
        if i in checks or i in found
    ]


def before_turn(calls: list[Written], turn: int) -> str | None:
    """The snapshot of the workspace as it was before `turn` began: the first write's
    at or after it, taken before that write; else the last earlier write's, after it;
    None when the run recorded no snapshot."""
    for w in calls:
        if w.turn >= turn:
            return w.snapshots.before
    return calls[-1].snapshots.after if calls else None


def snapshots_kept(*, over: bool, ended_at: float, now: float, keep_s: float) -> bool:
    """Whether a run's snapshots are still kept: always while it may go on (or with
    `keep_s` 0: as long as the run is), else for `keep_s` after it ended."""
    return not over or keep_s <= 0 or now - ended_at < keep_s
