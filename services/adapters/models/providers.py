"""The providers, one row each: how a worker makes the adapter that serves a model
spec, where that adapter sends its requests and with which credential (what `run`
checks before it records anything: `agentledger.services.adapters.models.preflight`),
and the request body as it goes on the wire (what `context --json` shows). A new
provider is its spec class, its adapter, its wire mapping and a row here; the core
asks the spec's capabilities, never its type. The adapters' modules are imported
when first asked for: an SDK takes seconds to import, and a scripted run needs none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentledger.schemas.spec import (
    AnthropicModel,
    ModelSpec,
    OpenAIModel,
    ReplayModel,
    ScriptedModel,
)
from agentledger.services.adapters.models.port import (
    ModelAdapter,
    ModelError,
    ModelReply,
    ModelRequest,
)
from agentledger.services.adapters.store.port import EventStore
from agentledger.services.settings import Settings


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a worker sends a spec's requests, and the credential it sends along:
    `url_variable` is the setting that named the URL, when one did; `key_variable`
    the credential's variable, None when none is needed; `key_required`: a request
    cannot be sent without it (a self-hosted server may need none)."""

    url: str
    url_variable: str | None
    key_variable: str | None
    key_set: bool
    key_required: bool = True


Make = Callable[[Any, Settings, EventStore | None], ModelAdapter]


@dataclass(frozen=True, slots=True)
class Provider:
    make: Make
    endpoint: Callable[[Any, Settings], Endpoint] | None = None  # None: nothing to reach
    wire: Callable[[Any, ModelRequest], dict[str, Any]] | None = None  # the body as sent


@dataclass(frozen=True, slots=True)
class _Unavailable:
    """The adapter of a provider this worker cannot speak to (its SDK is not installed):
    each request fails, not configured, saying what to install."""

    cause: str

    def respond(self, request: ModelRequest) -> ModelReply:
        raise ModelError(self.cause, kind="not_configured")

    def claim_lease_s(self) -> float:
        return 30.0


def _scripted(spec: ScriptedModel, settings: Settings, store: EventStore | None) -> ModelAdapter:
    from agentledger.services.adapters.models.scripted import ScriptedAdapter

    return ScriptedAdapter(spec)


def _replay(spec: ReplayModel, settings: Settings, store: EventStore | None) -> ModelAdapter:
    from agentledger.services.adapters.archive.archive import open_archive
    from agentledger.services.adapters.models.replay import ReplayAdapter
    from agentledger.services.adapters.reading.archived import ArchivedStore

    if store is None:
        raise ValueError("the replay model needs the event store")
    recorded = spec.replay.run_id
    archive = open_archive(settings.archive_url, settings.state_dir, settings.prefix)
    source = store if archive is None else ArchivedStore(store, archive)  # an archived run too
    own = source.read if spec.replay.stop_at_divergence else None
    return ReplayAdapter(recorded, lambda: source.read(recorded), own)


def _anthropic(spec: AnthropicModel, settings: Settings, store: EventStore | None) -> ModelAdapter:
    from agentledger.services.adapters.models.anthropic_adapter import AnthropicAdapter

    return AnthropicAdapter(
        spec.anthropic,
        api_key=settings.anthropic_api_key,
        base_url=settings.anthropic_base_url,
        lease_s=settings.model_lease_s,
    )


def _anthropic_endpoint(spec: AnthropicModel, settings: Settings) -> Endpoint:
    from agentledger.services.adapters.models.anthropic_wire import DEFAULT_BASE_URL

    url = settings.anthropic_base_url or DEFAULT_BASE_URL
    variable = "ANTHROPIC_BASE_URL" if settings.anthropic_base_url else None
    return Endpoint(url, variable, "ANTHROPIC_API_KEY", bool(settings.anthropic_api_key))


def _anthropic_wire(spec: AnthropicModel, request: ModelRequest) -> dict[str, Any]:
    from agentledger.services.adapters.models.anthropic_wire import request_params

    return request_params(spec.anthropic, request)


def _openai(spec: OpenAIModel, settings: Settings, store: EventStore | None) -> ModelAdapter:
    try:
        from agentledger.services.adapters.models.openai_adapter import OpenAIAdapter
    except ModuleNotFoundError as exc:
        if exc.name != "openai":
            raise
        return _Unavailable(
            "the openai SDK is not installed here: pip install 'agentledger[openai]'"
        )
    return OpenAIAdapter(spec, settings)


def _openai_endpoint(spec: OpenAIModel, settings: Settings) -> Endpoint:
    from agentledger.services.adapters.models.openai_wire import endpoint_of, is_openai_own

    url, named, variable, key = endpoint_of(spec, settings)
    return Endpoint(url, named, variable, key is not None, key_required=is_openai_own(url))


def _openai_wire(spec: OpenAIModel, request: ModelRequest) -> dict[str, Any]:
    from agentledger.services.adapters.models.openai_wire import wire_body

    return wire_body(spec.openai, request)


PROVIDERS: dict[type, Provider] = {
    ScriptedModel: Provider(_scripted),
    ReplayModel: Provider(_replay),
    AnthropicModel: Provider(_anthropic, _anthropic_endpoint, _anthropic_wire),
    OpenAIModel: Provider(_openai, _openai_endpoint, _openai_wire),
}


def provider_of(spec: ModelSpec) -> Provider:
    """The row of the spec's provider (every spec class of `ModelSpec` has one: a test says so)."""
    return PROVIDERS[type(spec)]


def make_adapter(spec: ModelSpec, settings: Settings, store: EventStore | None) -> ModelAdapter:
    return provider_of(spec).make(spec, settings, store)
