"""The replay model: re-drives a recorded run from its log. Each model request
of the new run is answered with the reply the recorded run got at the same
turn — content verbatim (thinking signatures included), stop reason, usage and
model id — so the tools, the checks and the core run again for real while the
model's part is fixed. A turn the recorded run never reached is an error that
ends the new run, which the divergence report then shows.

Only a run of the same tenant is played: the intake refuses a request naming
another tenant's run, and the adapter checks again against the recorded run's
own `RunCreated` (and the tenant of the run asking, in its request) each time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentledger.events.grants import replay_model_refusal
from agentledger.events.types import ModelResponded, RunCreated
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest

LEASE_S = 10.0


class ReplayAdapter:
    def __init__(self, run_id: str, read: Callable[[], Sequence[Envelope[Any]]]):
        self._run_id = run_id
        self._read = read
        self._replies: dict[int, ModelResponded] = {}
        self._tenant: str | None = None  # the recorded run's, from its RunCreated

    def claim_lease_s(self) -> float:
        return LEASE_S

    def respond(self, request: ModelRequest) -> ModelReply:
        recorded = self._replies.get(request.turn)
        if recorded is None or self._tenant is None:  # read (again): it may have grown since
            self._load()
            recorded = self._replies.get(request.turn)
        if request.tenant is None:  # a replay plays only a run of the tenant of the run asking
            raise ModelError(
                f"not granted: run {request.run_id!r} asked without its tenant", kind="permission"
            )
        refusal = replay_model_refusal(request.run_id, request.tenant, self._run_id, self._tenant)
        if refusal is not None:
            raise ModelError(refusal, kind="permission")
        if recorded is None:
            message = (
                f"the recorded run {self._run_id!r} has no model reply for turn {request.turn}"
            )
            raise ModelError(message, kind="not_found")
        return ModelReply(
            content=recorded.content,
            stop_reason=recorded.stop_reason,
            usage=recorded.usage,
            model=recorded.model,
            stop_sequence=recorded.stop_sequence,
            stop_details=recorded.stop_details,
            truncated_tool_use_ids=recorded.truncated,
        )

    def _load(self) -> None:
        envelopes = self._read()
        self._replies = {
            env.data.turn: env.data for env in envelopes if isinstance(env.data, ModelResponded)
        }
        first = envelopes[0].data if envelopes else None
        self._tenant = first.spec.principal.tenant if isinstance(first, RunCreated) else None
