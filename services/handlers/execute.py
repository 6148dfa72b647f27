"""The tool pool: claim the call by appending ToolCallStarted, run it with its
timeout, record the outcome. The claim is what makes a redelivered message
harmless: a call that is not claimable any more is left alone."""

from __future__ import annotations

from events.state import RunState
from events.tool_step import Errored, Outcome, claim_call, record_outcome
from events.types import Event, ToolCallStarted, ToolError
from services.app import App
from services.steps import run_step
from services.tool_runner import run_tool
from services.tools import ToolContext

SOURCE = "tools"


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
    app.load_tools(state)
    registered = app.registry.get(call.name)
    if registered is None:  # validated in another process whose modules differ from ours
        outcome: Outcome = Errored(
            ToolError(
                code="internal", message=f"tool {call.name!r} is not loaded here", retryable=True
            )
        )
    else:
        ctx = ToolContext(
            run_id=run_id,
            call_id=call_id,
            workspace=state.workspace,
            principal_id=state.spec.principal.id,
            tenant=state.spec.principal.tenant,
        )
        outcome = run_tool(registered, call.input, ctx, timeout_s=call.timeout_s)
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
    )
