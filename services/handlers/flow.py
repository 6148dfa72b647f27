"""Driving a flow's run (`DriveFlow`): its stage started (`agentledger.events.flow_step`),
the child run that stage started made if it is not there yet, the child's end
recorded once it has ended (its spend with it), and the child of a cancelled flow
cancelled. Each is idempotent: the child's id is the parent's, the stage's and the
attempt's, so a flow driven again after a crash finds the child it started; a
child made twice is one run (its creation is refused the second time).

A child is made as the intake makes a run — its first event appended with its
first command queued — for the parent's principal (whose scopes the parent's grant
held), on the parent's task queue and tool set, in the parent's workspace. It is
part of its parent's place in the tenant's line (never held behind its own parent)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agentledger.events import controls
from agentledger.events.errors import ControlRefused
from agentledger.events.flow_state import FlowPhase
from agentledger.events.flow_step import (
    child_live,
    ended,
    left_waiting,
    owns,
    squatted,
    start,
    surfaced,
)
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event, RunCreated
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.handlers import delegate
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided

SOURCE = "flow"
MAX_STEPS = 64  # stages one delivery moves a flow through (children that ended at once)


def handle_drive_flow(app: App, run_id: str) -> None:
    s = app.runs.load(run_id)
    if s is not None and s.flow is None:
        return delegate.follow(app, run_id)  # a `delegate` call's child ended, or its run stops
    if s is None or s.flow is None or not app.serves(s):
        return
    for _ in range(MAX_STEPS):
        s = app.engine.take(run_id, Decided(SOURCE, start)).state
        for waited in left_waiting(s):  # routed on its wait for a person (`awaiting_human`)
            _stop(
                app,
                waited,
                by=f"flow {run_id}",
                reason="the flow went on without it (on: awaiting_human)",
            )
        flow = s.flow
        if flow is None or flow.phase is not FlowPhase.IN_CHILD or flow.child is None:
            return
        child = _child(app, s)
        if not owns(s, child):  # another run holds the child's id: never taken, never stopped
            app.engine.take(run_id, _Child(app, child.run_id, squatted))
            return
        stopping = s.status is RunStatus.CANCELLING or s.status.terminal
        if stopping and child_live(s) and not child.status.terminal:
            _cancel(app, s, child)
            return
        s = app.engine.take(run_id, _Child(app, child.run_id, surfaced)).state
        if s.flow is not None and s.flow.child != child.run_id:
            continue  # routed on its child's wait (`on: {awaiting_human: …}`)
        if not child.status.terminal:
            return  # its end, or its wait, sends the parent a DriveFlow
        app.engine.take(run_id, _Child(app, child.run_id, ended))


@dataclass(frozen=True, slots=True)
class _Child:
    """A decision on the flow's run and its child's state as the child's log has it."""

    app: App
    child_id: str
    decision: Callable[[RunState, RunState], list[Event]]
    source: str = SOURCE

    def gather(self, s: RunState) -> RunState | None:
        return self.app.runs.load(self.child_id)

    def decide(self, s: RunState, child: RunState | None) -> list[Event]:
        return self.decision(s, child) if child is not None else []


def _child(app: App, s: RunState) -> RunState:
    """The current stage's child run: made now if it is not there yet."""
    flow = s.flow
    assert flow is not None and flow.child is not None and flow.child_spec is not None
    found = app.runs.load(flow.child)
    if found is not None:
        return found
    created = RunCreated(
        spec=flow.child_spec, workspace=s.workspace, base_dir=s.base_dir, queue=s.queue,
        toolset=s.toolset, publisher=s.publisher, parent_run_id=s.run_id, stage=flow.stage,
    )  # fmt: skip
    try:
        return app.runs.create(created, flow.child, source=SOURCE, causation_id=s.last_event_id)
    except ConcurrencyConflict:  # another worker made it meanwhile
        made = app.runs.load(flow.child)
        assert made is not None
        return made


def _cancel(app: App, parent: RunState, child: RunState) -> None:
    """The cancelled flow's child is asked to stop as any run is (grace, then force)."""
    _stop(app, child.run_id, by=f"flow {parent.run_id}", reason=parent.cancel_by)


def _stop(app: App, child_id: str, *, by: str, reason: str) -> None:
    """A child asked to stop as any run is, unless it ended or was asked already."""

    def decide(c: RunState) -> list[Event]:
        if c.status.terminal or c.cancel_requested_at is not None:
            return []
        try:
            return controls.cancel(c, by=by, source=SOURCE, reason=reason)
        except ControlRefused:
            return []

    app.engine.take(child_id, Decided(SOURCE, decide))
