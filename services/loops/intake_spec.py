"""What the intake does to a run's spec's principal before it creates the run: it
holds only the scopes its spec asks for that the publisher's grant allows (the
operator's prices are the batch's: `agentledger.services.loops.intake_requests`)."""

from __future__ import annotations

from agentledger.events.grants import held_scopes
from agentledger.schemas.publishers import Publisher
from agentledger.schemas.spec import RunSpec


def held(spec: RunSpec, grant: Publisher) -> RunSpec:
    """The spec holding only the scopes it asks for that the grant allows."""
    scopes = held_scopes(spec.principal.scopes, grant)
    principal = spec.principal.model_copy(update={"scopes": scopes})
    return spec.model_copy(update={"principal": principal})
