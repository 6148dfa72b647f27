"""What the intake does to a run's spec before it creates the run: the principal
holds only the scopes its spec asks for that the publisher's grant allows, and
each model the spec names but does not price is given the operator's price
(`agentledger.events.pricing.with_operator_prices`), so the log says what the
run was priced at."""

from __future__ import annotations

from agentledger.events.grants import held_scopes
from agentledger.events.pricing import with_operator_prices
from agentledger.schemas.publishers import Publisher
from agentledger.schemas.spec import RunSpec
from agentledger.services.errors import ConfigError
from agentledger.services.loops.inbox_parse import Rejected
from agentledger.services.prices_file import operator_prices
from agentledger.services.settings import Settings


def held(spec: RunSpec, grant: Publisher) -> RunSpec:
    """The spec holding only the scopes it asks for that the grant allows."""
    scopes = held_scopes(spec.principal.scopes, grant)
    principal = spec.principal.model_copy(update={"scopes": scopes})
    return spec.model_copy(update={"principal": principal})


def priced(spec: RunSpec, settings: Settings) -> RunSpec:
    """The spec with the operator's price of each model it does not price itself."""
    try:
        return with_operator_prices(spec, operator_prices(settings))
    except ConfigError as exc:
        raise Rejected(f"the deployment's price table cannot be read: {exc}") from None
