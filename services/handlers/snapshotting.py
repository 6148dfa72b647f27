"""Snapshots around a write call (issue 39): a call that writes files of its run's
workspace runs between two snapshots of it, and its outcome carries both ids. A
snapshot that cannot be taken (the store's disk full or unwritable) never stops the
call: its outcome then carries none, and the worker's log says why."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TypeVar

from agentledger.events.event_model import Snapshots
from agentledger.events.state import Call, RunState
from agentledger.events.tool_step import Errored, Outcome, Succeeded
from agentledger.events.workspace_tree import writes_files
from agentledger.services.adapters.snapshots.taker import Snapshotter, Taken

log = logging.getLogger(__name__)
T = TypeVar("T")


def around(
    snapshots: Snapshotter | None, state: RunState, call: Call, run: Callable[[], Outcome]
) -> Outcome:
    """Run `run`, between two snapshots of the workspace when the call writes its files."""
    workspace = state.workspace
    if snapshots is None or workspace is None or not writes_files(call.read_only, call.writes):
        return run()
    before = _take(snapshots, workspace)
    outcome = run()
    if before is None or not isinstance(outcome, Succeeded | Errored):
        return outcome
    after = _take(snapshots, workspace)
    if after is None:
        return outcome
    notes = [n for n in (before.note, after.note) if n]
    pair = Snapshots(before=before.tree_id, after=after.tree_id, note="; ".join(notes) or None)
    return dataclasses.replace(outcome, snapshots=pair)


def around_check(
    snapshots: Snapshotter | None, workspace: str | None, run: Callable[[], T]
) -> tuple[T, Snapshots | None]:
    """Run an acceptance check between two snapshots of the run's workspace: the state
    it judged, and the one it left (a command check may write: a cache, a report)."""
    if snapshots is None or workspace is None:
        return run(), None
    before = _take(snapshots, workspace)
    done = run()
    after = _take(snapshots, workspace) if before is not None else None
    if before is None or after is None:
        return done, None
    notes = [n for n in (before.note, after.note) if n]
    return done, Snapshots(
        before=before.tree_id, after=after.tree_id, note="; ".join(notes) or None
    )


def _take(snapshots: Snapshotter, workspace: str) -> Taken | None:
    try:
        return snapshots.take(workspace)
    except OSError as e:
        log.warning("workspace snapshot of %r not taken: %s", workspace, e)
        return None
