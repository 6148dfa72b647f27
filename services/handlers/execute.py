"""The tool pool: claim the call by appending ToolCallStarted, run it with its
timeout while watching the run for a cancel, record the outcome. The claim is
what makes a redelivered message harmless: a call that is not claimable any
more is left alone."""

from __future__ import annotations

import threading

from events.fold import fold
from events.state import RunState
from events.status import RunStatus
from events.tool_step import Errored, Outcome, claim_call, record_outcome
from events.types import Event, ToolCallStarted, ToolError
from services.adapters.tools.registry import ToolContext
from services.adapters.tools.runner import run_tool
from services.adapters.tools.sandbox import policy_for
from services.handlers.app import App
from services.handlers.once import run_once
from services.handlers.schedule import release_call
from services.handlers.steps import load, run_step

SOURCE = "tools"
WATCH_EVERY_S = 0.1


def handle_execute_call(app: App, run_id: str, call_id: str) -> None:
    def claim(s: RunState) -> list[Event]:
        return claim_call(s, call_id, worker=app.worker, now=app.clock.now())

    step = run_step(app.store, app.clock, run_id, claim, source=SOURCE)
    started = step.first(ToolCallStarted)
    if started is None:
        return
    state = step.state
    call = state.call(call_id)
    assert call is not None
    started_at = app.clock.now()
    with LeaseKeeper(app, call.lock_request):
        outcome = _run(app, state, call_id)
    finished_at = app.clock.now()
    run_step(
        app.store,
        app.clock,
        run_id,
        lambda s: record_outcome(
            s,
            call_id,
            attempt=started.attempt,
            outcome=outcome,
            started_at=started_at,
            finished_at=finished_at,
        ),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
    )
    release_call(app, call.lock_request)


def _run(app: App, state: RunState, call_id: str) -> Outcome:
    call = state.call(call_id)
    assert call is not None
    app.load_tools(state)
    registered = app.registry.get(call.name)
    if registered is None:  # validated in another process whose modules differ from ours
        message = f"tool {call.name!r} is not loaded here"
        return Errored(ToolError(code="internal", message=message, retryable=True))
    ctx = ToolContext(
        run_id=state.run_id,
        call_id=call_id,
        workspace=state.workspace,
        principal_id=state.spec.principal.id,
        tenant=state.spec.principal.tenant,
        tokens=dict(call.tokens or {}),
        op_key=call.op_key,
        outputs=lambda ref: _output_of(app, state.run_id, ref),
        sandbox=policy_for(app.settings),
    )
    owner = f"{state.run_id}/{call_id}/{call.attempts}"
    return run_once(
        app,
        call,
        owner,
        lambda: run_tool(
            registered,
            call.input,
            ctx,
            timeout_s=call.timeout_s,
            stop_requested=RunWatch(app, state).stop_requested,
            grace_s=state.spec.policies.cancel_grace_s,
        ),
    )


def _output_of(app: App, run_id: str, call_id: str) -> object | None:
    state = load(app.store, run_id)
    for turn in state.turns if state else ():
        call = turn.call(call_id)
        if call is not None and call.output is not None:
            return call.output
    return None


class RunWatch:
    """Reads the run's new events at most every WATCH_EVERY_S; says stop once the
    run is cancelling or over (cancelled, timed out, failed…)."""

    def __init__(self, app: App, state: RunState):
        self._app = app
        self._state = state
        self._looked_at = 0.0

    def stop_requested(self) -> float | None:
        """When the run asked its calls to stop, or None while it has not."""
        now = self._app.clock.now()
        if now - self._looked_at >= WATCH_EVERY_S:
            self._looked_at = now
            newer = fold(
                self._app.store.read(self._state.run_id, after_seq=self._state.seq), self._state
            )
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

    def __init__(self, app: App, request_id: str | None):
        self._app = app
        self._request = request_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"lease-{request_id}")

    def __enter__(self) -> LeaseKeeper:
        if self._request is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _beat(self) -> None:
        every = self._app.locks.lease_s / 3
        while not self._stop.wait(every):
            if not self._app.locks.renew(self._request or "", now=self._app.clock.now()):
                return  # the lease was lost; the fencing token protects what follows
