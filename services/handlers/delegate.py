"""The built-in `delegate` tool's calls (`agentledger.events.delegate`): a claimed call
makes its child run (or finds it: the child's id is the parent's and the call's) and
frees its thread — no thread waits for a child; the child's end (or its wait) sends
the parent a `DriveFlow`, which records the call's outcome with the child's spend
(`follow`). A parent that is cancelled, or ended, cancels its live children (grace,
then force, both times in each child's log) and records each call once its child has
ended. A child is made as a flow's stage is: for the parent's principal, on its task
queue and tool set, in its workspace."""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.events import controls
from agentledger.events.delegate import (
    STAGE,
    child_ended,
    child_spec,
    delegate_child_id,
    failed_to_start,
    is_delegate_child,
    waits_on_children,
)
from agentledger.events.errors import ControlRefused
from agentledger.events.state import Call, RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import Event, RunCreated
from agentledger.services.errors import ConcurrencyConflict
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided

SOURCE = "tools"


def start(app: App, state: RunState, call: Call) -> Decided:
    """A claimed delegate call (on `state`, the claim's): its child made or found; its
    outcome now if the child has ended already, else nothing (the child's end tells)."""
    cid = delegate_child_id(state.run_id, call.call_id)
    child = app.runs.load(cid)
    if child is None:
        try:
            spec = child_spec(state, call, now=app.clock.now())
        except ValueError as exc:
            why = str(exc)
            return Decided(
                SOURCE, lambda s: failed_to_start(s, call.call_id, why, now=s.updated_at)
            )
        created = RunCreated(
            spec=spec, workspace=state.workspace, base_dir=state.base_dir, queue=state.queue,
            toolset=state.toolset, publisher=state.publisher, parent_run_id=state.run_id,
            stage=f"{STAGE}{call.call_id}",
        )  # fmt: skip
        try:
            child = app.runs.create(created, cid, source=SOURCE, causation_id=state.last_event_id)
        except ConcurrencyConflict:  # made meanwhile (a redelivered claim)
            child = app.runs.load(cid)
    found, now = child, app.clock.now()
    if found is None:
        return Decided(SOURCE, lambda s: [])
    return Decided(SOURCE, lambda s: child_ended(s, call.call_id, found, now=now))


def follow(app: App, run_id: str) -> None:
    """A parent's delegate calls whose children ended: recorded; a stopping parent's
    live children: cancelled."""
    s = app.runs.load(run_id)
    if s is None or not app.serves(s):
        return
    stopping = s.status is RunStatus.CANCELLING or s.status.terminal
    for call in waits_on_children(s):
        child = app.runs.load(delegate_child_id(s.run_id, call.call_id))
        if child is None:
            continue
        if stopping and is_delegate_child(s, call.call_id, child) and not child.status.terminal:
            _cancel(app, s, child)
        elif child.status.terminal:
            app.engine.take(run_id, _Ended(app, call.call_id))


@dataclass(frozen=True, slots=True)
class _Ended:
    """The call's outcome from its child's state as the child's log has it now."""

    app: App
    call_id: str
    source: str = SOURCE

    def gather(self, s: RunState) -> RunState | None:
        return self.app.runs.load(delegate_child_id(s.run_id, self.call_id))

    def decide(self, s: RunState, child: RunState | None) -> list[Event]:
        if child is None:
            return []
        return child_ended(s, self.call_id, child, now=self.app.clock.now())


def _cancel(app: App, parent: RunState, child: RunState) -> None:
    by = f"parent {parent.run_id}"

    def decide(c: RunState) -> list[Event]:
        if c.status.terminal or c.cancel_requested_at is not None:
            return []
        try:
            return controls.cancel(c, by=by, source=SOURCE, reason=parent.cancel_by)
        except ControlRefused:
            return []

    app.engine.take(child.run_id, Decided(SOURCE, decide))
