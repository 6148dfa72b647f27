"""The replay model: re-drives a recorded run from its log. Each model request
of the new run is answered with the reply the recorded run got at the same
turn — content verbatim (thinking signatures included), stop reason, usage and
model id — so the tools, the checks and the core run again for real while the
model's part is fixed. A turn the recorded run never reached is an error that
ends the new run, which the divergence report then shows. Asked to stop at the
divergence (`whatif`), it answers no turn once a call of the new run came out
otherwise than the recorded run's: that ends the new run there. An MCP server's n-th
sampling request is answered with the recorded run's n-th (`ToolSampledModel`).

Only a run of the same tenant is played: the intake refuses a request naming
another tenant's run, and the adapter checks again against the recorded run's
own `RunCreated` (and the tenant of the run asking, in its request) each time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentledger.events.grants import replay_model_refusal
from agentledger.events.types import ModelResponded, RunCreated, ToolSampledModel
from agentledger.events.whatif import departed
from agentledger.schemas.content import TextBlock
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.models.port import ModelError, ModelReply, ModelRequest

LEASE_S = 10.0


Read = Callable[[str], Sequence[Envelope[Any]]]


class ReplayAdapter:
    def __init__(
        self, run_id: str, read: Callable[[], Sequence[Envelope[Any]]], own: Read | None = None
    ):
        self._run_id = run_id
        self._read = read
        self._own = own  # set: no reply once the asking run departed from the recorded one
        self._replies: dict[tuple[str, int], ModelResponded | ToolSampledModel] = {}
        self._tenant: str | None = None  # the recorded run's, from its RunCreated

    def claim_lease_s(self) -> float:
        return LEASE_S

    def respond(self, request: ModelRequest) -> ModelReply:
        key = ("sample", request.sample) if request.sample else ("turn", request.turn)
        recorded = self._replies.get(key)
        if recorded is None or self._tenant is None:  # read (again): it may have grown since
            self._load()
            recorded = self._replies.get(key)
        if request.tenant is None:  # a replay plays only a run of the tenant of the run asking
            raise ModelError(
                f"not granted: run {request.run_id!r} asked without its tenant", kind="permission"
            )
        refusal = replay_model_refusal(request.run_id, request.tenant, self._run_id, self._tenant)
        if refusal is not None:
            raise ModelError(refusal, kind="permission")
        if self._own is not None and not request.sample:
            self._still_applies(request.run_id)
        if recorded is None:
            what = f"sampling request {key[1]}" if request.sample else f"turn {request.turn}"
            message = f"the recorded run {self._run_id!r} has no model reply for {what}"
            raise ModelError(message, kind="not_found")
        if isinstance(recorded, ToolSampledModel):
            text = (TextBlock(text=recorded.text),)
            return ModelReply(text, recorded.stop_reason, recorded.usage, recorded.model)
        return ModelReply(
            content=recorded.content,
            stop_reason=recorded.stop_reason,
            usage=recorded.usage,
            model=recorded.model,
            stop_sequence=recorded.stop_sequence,
            stop_details=recorded.stop_details,
            truncated_tool_use_ids=recorded.truncated,
        )

    def _still_applies(self, run_id: str) -> None:
        """ModelError when a call of the asking run came out otherwise than the recorded
        run's: the recorded replies answered another conversation from there."""
        assert self._own is not None
        d = departed([e.data for e in self._read()], [e.data for e in self._own(run_id)])
        if d is not None:
            raise ModelError(
                f"departed from {self._run_id!r} at turn {d.turn}, call {d.key!r} ({d.name}): "
                "its recorded replies no longer apply",
                kind="invalid_request",
            )

    def _load(self) -> None:
        envelopes = self._read()
        self._replies = {
            ("turn", env.data.turn): env.data
            for env in envelopes
            if isinstance(env.data, ModelResponded)
        }
        self._replies.update(
            (("sample", env.data.sample), env.data)
            for env in envelopes
            if isinstance(env.data, ToolSampledModel)
        )
        first = envelopes[0].data if envelopes else None
        self._tenant = first.spec.principal.tenant if isinstance(first, RunCreated) else None
