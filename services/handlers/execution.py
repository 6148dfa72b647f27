"""Running a claimed call: its context, its one-time guard by operation key
(`once`), its timeout, a watch on the run for a cancel, and the heartbeat that
keeps its locks while it runs. Turns what happened into an `Outcome`. A Redis
outage while the tool runs stops neither the tool nor its heartbeat: the watch
cannot see a cancel then, and renewing is tried again at the next beat."""

from __future__ import annotations

import threading

from agentledger.events.branching import recorded_outcome, taken_from_origin
from agentledger.events.fold import fold
from agentledger.events.grants import replay_model_refusal
from agentledger.events.lock_step import LockAsk, held_ask
from agentledger.events.state import Call, RunState
from agentledger.events.status import RunStatus
from agentledger.events.tool_step import Errored, Outcome
from agentledger.events.types import RunCreated, ToolError
from agentledger.services.adapters.archive.archive import open_archive
from agentledger.services.adapters.reading.archived import ArchivedStore
from agentledger.services.adapters.tools.context import ToolContext
from agentledger.services.adapters.tools.runner import run_tool
from agentledger.services.handlers.app import App
from agentledger.services.handlers.findings import max_timeout_s
from agentledger.services.handlers.once import run_once
from agentledger.services.handlers.outage import OUTAGE_ERRORS
from agentledger.services.handlers.outputs import RunOutputs
from agentledger.services.handlers.snapshotting import around

WATCH_EVERY_S = 0.1


def execute(app: App, state: RunState, call: Call) -> Outcome:
    if (branch := state.spec.branch) is not None and taken_from_origin(state.spec, call.turn):
        return _origins(app, state, branch.run_id, call)
    registered = app.toolset.get(call.name)
    if registered is None:  # validated by a worker of the same tool set: cannot happen
        message = f"tool {call.name!r} is not in this worker's tool set"
        return Errored(ToolError(code="internal", message=message, retryable=False))
    outputs = RunOutputs(app, state.run_id)
    ctx = ToolContext(
        run_id=state.run_id,
        call_id=call.call_id,
        workspace=state.workspace,
        principal_id=state.spec.principal.id,
        tenant=state.spec.principal.tenant,
        tokens=dict(call.tokens or {}),
        op_key=call.op_key,
        outputs=outputs.whole,
        output_window=outputs.window,
        sandbox=app.sandbox,
    )
    owner = f"{state.run_id}/{call.call_id}/{call.attempts}"
    with LeaseKeeper(app, held_ask(state, call.call_id)):
        return around(
            app.snapshots, state, call,
            lambda: run_once(
                app, state, call, owner,
                lambda: run_tool(
                    registered, call.input, ctx,
                    timeout_s=min(call.timeout_s, max_timeout_s(registered, app.settings)),
                    stop_requested=RunWatch(app, state).stop_requested,
                    grace_s=state.spec.policies.cancel_grace_s,
                ),
            ),
        )  # fmt: skip


def _origins(app: App, state: RunState, origin: str, call: Call) -> Outcome:
    """A branch's call before its own turn: the origin's outcome, nothing run (from
    the archive when the origin left Redis). Only an origin of the run's own tenant is
    read (the intake checked; checked again)."""
    archive = open_archive(app.settings.archive_url, app.settings.state_dir, app.settings.prefix)
    envs = (app.store if archive is None else ArchivedStore(app.store, archive)).read(origin)
    first = envs[0].data if envs else None
    tenant = first.spec.principal.tenant if isinstance(first, RunCreated) else None
    refusal = replay_model_refusal(state.run_id, state.spec.principal.tenant, origin, tenant)
    if refusal is not None:
        return Errored(ToolError(code="permission_denied", message=refusal, retryable=False))
    return recorded_outcome((e.data for e in envs), origin, call.call_id)


class RunWatch:
    """Reads the run's new events at most every WATCH_EVERY_S; says stop once the
    run is cancelling or over (cancelled, timed out, failed…)."""

    def __init__(self, app: App, state: RunState):
        self._app = app
        self._state = state
        self._looked_at = app.clock.now()

    def stop_requested(self) -> float | None:
        """When the run asked its calls to stop, or None while it has not."""
        now = self._app.clock.now()
        if now - self._looked_at >= WATCH_EVERY_S:
            self._looked_at = now
            try:
                newer = fold(
                    self._app.store.read(self._state.run_id, after_seq=self._state.seq),
                    self._state,
                )
            except OUTAGE_ERRORS:
                return None  # Redis is away: nobody can have asked; the tool goes on
            assert newer is not None
            self._state = newer
        s = self._state
        if s.status is RunStatus.CANCELLING or s.status.terminal:
            return s.cancel_requested_at or s.updated_at
        return None


class LeaseKeeper:
    """Renews the call's locks from this worker's own heartbeat thread while the
    tool runs, so a busy worker is never taken for a dead one; a dead worker stops
    renewing and its locks pass on after the lease."""

    def __init__(self, app: App, ask: LockAsk | None):
        self._app = app
        self._request = ask
        self._stop = threading.Event()

    def __enter__(self) -> LeaseKeeper:
        if self._request is not None:  # a call without locks has nothing to renew: no thread
            name = f"lease-{self._request.request_id}"
            threading.Thread(target=self._beat, daemon=True, name=name).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _beat(self) -> None:
        every = self._app.locks.lease_s / 3
        while not self._stop.wait(every):
            try:
                if self._request is None or not self._app.locks.renew(self._request):
                    return  # the lease was lost; the fencing token protects what follows
            except OUTAGE_ERRORS:
                continue  # Redis is away: renew at the next beat (the lease may run out meanwhile)
