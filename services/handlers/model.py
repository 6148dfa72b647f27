"""The model pool: claim the turn's model call, call the adapter, record the reply.

The turn's context view (bounded, redacted) is assembled once per request —
gathered before the claim is decided, on the state it is decided on — and
handed both to the budget check (the request's size) and to the adapter (what
is sent); the claim records the view's hash and assembly decisions. The reply
is recorded across a short Redis outage rather than paid for twice."""

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
from services.adapters.tools.toolset import ToolSet
from services.adapters.tracing.current import model_request_context
from services.handlers.app import App
from services.secrets import redactor_for

SOURCE = "model"


def handle_request_model(app: App, run_id: str) -> None:
    def gather(s: RunState) -> ContextView | None:
        due = app.serves(s) and model_request_due(s, now=app.clock.now())
        return context_view(app.toolset, s) if due else None

    def claim(s: RunState, view: ContextView | None) -> list[Event]:
        if view is None:
            return []
        lease = app.model_for(s.spec.model).claim_lease_s()
        events = request_model(
            s, now=app.clock.now(), lease_s=lease, estimate=estimate_request(s, view)
        )
        if not events or not isinstance(events[0], ModelRequested):
            return events
        views[events[0].attempt] = view
        return [with_context(events[0], view), *events[1:]]

    views: dict[int, ContextView] = {}
    step = app.runs.step_with(run_id, gather, claim, source=SOURCE)
    claimed = step.first(ModelRequested)
    if claimed is None:
        return
    request = model_request(run_id, claimed, views[claimed.attempt])
    adapter = app.model_for(step.state.spec.model)
    try:
        with model_request_context(run_id, claimed.turn, claimed.attempt):  # the SDK's span: a child
            reply = adapter.respond(request)
    except ModelError as exc:
        if exc.retryable:
            raise  # the claim expires and the sweeper re-drives the turn
        message = str(exc)
        app.runs.step(
            run_id,
            lambda s: record_model_error(
                s, turn=claimed.turn, attempt=claimed.attempt, message=message
            ),
            source=SOURCE,
            held=step.state,  # the state of our own claim: no reload
        )
        return
    app.runs.step(
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
        outage_s=app.settings.outcome_retry_s,
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


def context_view(toolset: ToolSet, s: RunState) -> ContextView:
    """What the model is shown at this point of the run (also `agentledger context`)."""
    return assemble(s, toolset.offered(s.spec.tools), redactor_for(s.spec))
