"""The model pool: claim the turn's model call, call the adapter, record the reply.

The turn's context view (bounded, redacted) is assembled once per request and
handed both to the budget check (the request's size) and to the adapter (what
is sent); the claim records the view's hash and assembly decisions."""

from __future__ import annotations

from events.budgets import estimate_request
from events.context_view import ContextView, assemble, with_context
from events.model_step import (
    model_request_due,
    record_model_error,
    record_model_reply,
    request_model,
)
from events.state import RunState
from events.types import Event, ModelRequested
from services.adapters.models.port import ModelError, ModelRequest
from services.adapters.tools.registry import BUILTIN, ToolRegistry
from services.handlers.app import App
from services.handlers.spec_check import tool_paths
from services.handlers.steps import run_step
from services.secrets import redactor_for

SOURCE = "model"


def handle_request_model(app: App, run_id: str) -> None:
    views: list[ContextView] = []

    def claim(s: RunState) -> list[Event]:
        now = app.clock.now()
        if not model_request_due(s, now=now):
            return []
        view = context_view(app.registry, s)
        lease = app.model_for(s.spec.model).claim_lease_s()
        events = request_model(s, now=now, lease_s=lease, estimate=estimate_request(s, view))
        if not events or not isinstance(events[0], ModelRequested):
            return events
        views.append(view)
        return [with_context(events[0], view), *events[1:]]

    step = run_step(app.store, app.clock, run_id, claim, source=SOURCE)
    claimed = step.first(ModelRequested)
    if claimed is None:
        return
    state, view = step.state, views[-1]
    request = model_request(run_id, claimed, view)
    adapter = app.model_for(state.spec.model)
    try:
        reply = adapter.respond(request)
    except ModelError as exc:
        if exc.retryable:
            raise  # the claim expires and the sweeper re-drives the turn
        message = str(exc)
        run_step(
            app.store,
            app.clock,
            run_id,
            lambda s: record_model_error(
                s, turn=claimed.turn, attempt=claimed.attempt, message=message
            ),
            source=SOURCE,
            held=step.state,  # the state of our own claim: no reload
        )
        return
    run_step(
        app.store,
        app.clock,
        run_id,
        lambda s: record_model_reply(
            s,
            turn=claimed.turn,
            attempt=claimed.attempt,
            content=reply.content,
            stop_reason=reply.stop_reason,
            usage=reply.usage,
            model=reply.model,
            truncated=reply.truncated_tool_use_ids,
            retries=reply.retries,
            stop_sequence=reply.stop_sequence,
            stop_details=reply.stop_details,
        ),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
    )


def model_request(run_id: str, claimed: ModelRequested, view: ContextView) -> ModelRequest:
    """What the adapter is asked: the view as assembled for the claim."""
    return ModelRequest(
        run_id,
        claimed.turn,
        view.system,
        view.messages,
        view.tools,
        context_tokens=view.tokens,
        server_tools=view.server_tools,
        model=claimed.model,
    )


def context_view(registry: ToolRegistry, s: RunState) -> ContextView:
    """What the model is shown at this point of the run (also `agentledger context`)."""
    # the built-in tools too: every run is offered them, whatever this process imported so far
    registry.load([*s.spec.tools, BUILTIN], tool_paths(s.spec, s.base_dir))
    tools = tuple(t.spec for t in registry.of_modules(s.spec.tools))
    return assemble(s, tools, redactor_for(s.spec))
