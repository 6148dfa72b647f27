"""The model pool: claim the turn's model call, call the adapter, record the reply.

The adapter is given the turn's context view (bounded, redacted), not the full
conversation; the claim records the view's hash and assembly decisions. The
reply is recorded across a short Redis outage rather than paid for twice."""

from __future__ import annotations

from events.context_view import ContextView, assemble, with_context
from events.model_step import record_model_error, record_model_reply, request_model
from events.state import RunState
from events.types import Event, ModelRequested
from services.adapters.models.port import ModelError, ModelRequest
from services.adapters.tools.toolset import ToolSet
from services.handlers.app import App
from services.secrets import redactor_for

SOURCE = "model"


def handle_request_model(app: App, run_id: str) -> None:
    views: list[ContextView] = []

    def claim(s: RunState) -> list[Event]:
        if not app.serves(s):
            return []
        lease = app.model_for(s.spec.model).claim_lease_s()
        events = request_model(s, now=app.clock.now(), lease_s=lease)
        if not events or not isinstance(events[0], ModelRequested):
            return events
        views.append(context_view(app.toolset, s))
        return [with_context(events[0], views[-1]), *events[1:]]

    step = app.runs.step(run_id, claim, source=SOURCE)
    claimed = step.first(ModelRequested)
    if claimed is None:
        return
    state, view = step.state, views[-1]
    request = ModelRequest(
        run_id, claimed.turn, view.system, view.messages, view.tools, context_tokens=view.tokens
    )
    adapter = app.model_for(state.spec.model)
    try:
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
        ),
        source=SOURCE,
        held=step.state,  # the state of our own claim: no reload
        outage_s=app.settings.outcome_retry_s,
    )


def context_view(toolset: ToolSet, s: RunState) -> ContextView:
    """What the model is shown at this point of the run (also `agentledger context`)."""
    return assemble(s, toolset.specs, redactor_for(s.spec))
