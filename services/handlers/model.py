"""The model pool: claim the turn's model call, call the adapter, record the reply."""

from __future__ import annotations

from events.conversation import messages
from events.model_step import record_model_error, record_model_reply, request_model
from events.state import RunState
from events.types import Event, ModelRequested
from services.app import App
from services.models.port import ModelError, ModelRequest
from services.steps import run_step

SOURCE = "model"


def handle_request_model(app: App, run_id: str) -> None:
    def claim(s: RunState) -> list[Event]:
        lease = app.model_for(s.spec.model).claim_lease_s()
        return request_model(s, now=app.clock.now(), lease_s=lease)

    step = run_step(app.store, app.clock, run_id, claim, source=SOURCE)
    claimed = step.first(ModelRequested)
    if claimed is None:
        return
    state = step.state
    app.load_tools(state)
    tools = tuple(t.spec for t in app.registry.of_modules(state.spec.tools))
    request = ModelRequest(run_id, claimed.turn, state.spec.system, messages(state), tools)
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
        ),
        source=SOURCE,
    )
