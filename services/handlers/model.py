"""The model pool's step: claim the turn's model call (`ModelClaim`), call the
adapter (`answer`), which gives the step that records its reply (a failure is
recorded there and then).

The turn's context view (bounded, redacted) is assembled once per request —
gathered before the claim is decided, on the state it is decided on — and
handed both to the budget check (the request's size) and to the adapter (what
is sent); the claim records the view's hash and assembly decisions. The reply
is recorded across a short Redis outage rather than paid for twice. Who takes
these steps, and what they carry on with, is `agentledger.services.handlers.carry`'s."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentledger.events.branching import model_at
from agentledger.events.budgets import estimate_request
from agentledger.events.context_view import ContextView, assemble, with_context
from agentledger.events.delegate import offered
from agentledger.events.model_retry import ModelFailure, RetryBound
from agentledger.events.model_step import (
    model_request_due,
    record_model_error,
    record_model_reply,
    request_model,
)
from agentledger.events.state import RunState
from agentledger.events.types import Event, ModelRequested, ModelRequestFailed
from agentledger.services.adapters.live_text import Streamer
from agentledger.services.adapters.models.port import ModelError, ModelRequest
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.adapters.tracing.current import model_request_context
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.secrets import redactor_for
from agentledger.services.settings import Settings

SOURCE = "model"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ModelHeld:
    """A model call this worker claimed, with the view the claim was decided on."""

    claimed: ModelRequested
    view: ContextView


@dataclass
class ModelClaim:
    """Claim the turn's model call when it is due (`agentledger.events.model_step.request_model`)."""

    app: App
    source: str = SOURCE
    _views: dict[int, ContextView] = field(default_factory=dict)  # by attempt, as gathered

    def gather(self, s: RunState) -> ContextView | None:
        due = self.app.serves(s) and model_request_due(s, now=self.app.clock.now())
        return context_view(self.app.toolset, s) if due else None

    def decide(self, s: RunState, view: ContextView | None) -> list[Event]:
        if view is None:
            return []
        lease = self.app.model_for(s.spec.model).claim_lease_s()
        now, estimate = self.app.clock.now(), estimate_request(s, view)
        events = request_model(
            s, now=now, lease_s=lease, estimate=estimate, bound=retry_bound(self.app.settings)
        )
        if not events or not isinstance(events[0], ModelRequested):
            return events
        self._views[events[0].attempt] = view
        return [with_context(events[0], view), *events[1:]]

    def held(self, appended: Sequence[Any]) -> ModelHeld | None:
        claimed = next((e.data for e in appended if isinstance(e.data, ModelRequested)), None)
        return ModelHeld(claimed, self._views[claimed.attempt]) if claimed is not None else None


def answer(app: App, state: RunState, held: ModelHeld) -> Decided | None:
    """Call the adapter with the claimed view (on `state`, the claim's); the step that
    records the reply. A failed request is an outcome too: it is recorded with its
    cause (`ModelRequestFailed`) here, and logged as one warning line, and the turn
    is asked again after a wait (the sweeper re-drives it at `retry_at`) or the run
    fails — `agentledger.events.model_retry` decides, within the operator's bound. Nothing is
    raised for dramatiq to log a traceback of; nothing is carried on after it (None)."""
    claimed, run_id = held.claimed, state.run_id
    request = model_request(run_id, claimed, held.view, tenant=state.spec.principal.tenant)
    if app.live_text is not None:  # the text while it streams, for the web view
        redact = redactor_for(state.spec).text
        watch = Streamer(app.live_text, run_id, claimed.turn, claimed.attempt, redact)
        request = dataclasses.replace(request, watch=watch)
    adapter = app.model_for(model_at(state.spec, claimed.turn))  # a branch's: its origin's
    try:
        with model_request_context(
            run_id, claimed.turn, claimed.attempt
        ):  # the SDK's span: a child
            reply = adapter.respond(request)
    except ModelError as exc:
        _failed(app, state, claimed, exc.failure)
        return None
    return Decided(
        SOURCE,
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
    )


def _failed(app: App, state: RunState, claimed: ModelRequested, failure: ModelFailure) -> None:
    now, bound, run_id = app.clock.now(), retry_bound(app.settings), state.run_id
    result = app.engine.take(
        run_id,
        Decided(
            SOURCE,
            lambda s: record_model_error(
                s, turn=claimed.turn, attempt=claimed.attempt, failure=failure, now=now, bound=bound
            ),
        ),
        held=state,  # the state of our own claim: no reload
        outage_s=app.settings.outcome_retry_s,
    )
    recorded = result.first(ModelRequestFailed)
    then = "not recorded (the turn moved on)"
    if recorded is not None:
        then = (
            f"asked again in {recorded.retry_at - now:.1f} s"
            if recorded.retry_at
            else "the run fails"
        )
    log.warning(
        "run %s turn %d attempt %d: model request failed: %s; %s",
        run_id, claimed.turn, claimed.attempt, failure.cause, then,
    )  # fmt: skip


def retry_bound(settings: Settings) -> RetryBound:
    """The operator's bound on a turn's model requests."""
    return RetryBound(max_attempts=settings.model_max_attempts, retry_s=settings.model_retry_s)


def model_request(
    run_id: str, claimed: ModelRequested, view: ContextView, *, tenant: str | None = None
) -> ModelRequest:
    """What the adapter is asked: the view as assembled for the claim (and the
    run's tenant: a replay model plays only a run of the same tenant)."""
    return ModelRequest(
        run_id,
        claimed.turn,
        view.system,
        view.messages,
        view.tools,
        context_tokens=view.tokens,
        server_tools=view.server_tools,
        model=claimed.model,
        tenant=tenant,
    )


def context_view(toolset: ToolSet, s: RunState) -> ContextView:
    """What the model is shown at this point of the run (also `agentledger context`)."""
    return assemble(s, toolset.offered(offered(s.spec)), redactor_for(s.spec))
