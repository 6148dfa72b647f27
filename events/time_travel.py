"""Where a run's workspace snapshots are in its log (issue 39): each write call's
snapshots from its recorded outcome, and the snapshot of the workspace as it was
before a given turn. Pure: the trees and blobs themselves are the shell's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentledger.events.call_events import ToolCallFailed, ToolCallProposed, ToolCallSucceeded
from agentledger.events.event_model import Snapshots


@dataclass(frozen=True, slots=True)
class Written:
    """A call whose outcome carries its workspace's snapshots (its last outcome's)."""

    call_id: str
    turn: int
    name: str
    snapshots: Snapshots


def written(events: Iterable[object]) -> list[Written]:
    """The snapshotted calls of a run's events, in the order they were proposed."""
    proposed: dict[str, ToolCallProposed] = {}
    found: dict[str, Snapshots] = {}
    for e in events:
        if isinstance(e, ToolCallProposed):
            proposed[e.call_id] = e
        elif isinstance(e, ToolCallSucceeded | ToolCallFailed) and e.snapshots is not None:
            found[e.call_id] = e.snapshots
    return [
        Written(p.call_id, p.turn, p.name, found[p.call_id])
        for p in proposed.values()
        if p.call_id in found
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
