"""Which adapter speaks for a model spec: one per distinct spec (and settings), made
on first use and kept, bounded by count and by the specs' JSON (a scripted spec can
be megabytes); the spec objects last asked about are remembered too, so a turn's
request does not dump its spec again."""

from __future__ import annotations

import threading

from agentledger.schemas.spec import ModelSpec
from agentledger.services.adapters.models.port import ModelAdapter
from agentledger.services.adapters.models.providers import make_adapter
from agentledger.services.adapters.store.port import EventStore
from agentledger.services.bounded_cache import BoundedCache
from agentledger.services.settings import Settings

_ADAPTERS: BoundedCache[ModelAdapter] = BoundedCache(max_items=256, max_bytes=16 << 20)
_BY_OBJECT: BoundedCache[tuple[ModelSpec, ModelAdapter]] = BoundedCache(
    max_items=1024, max_bytes=16 << 20
)


def model_for(
    spec: ModelSpec, settings: Settings | None = None, store: EventStore | None = None
) -> ModelAdapter:
    """One adapter per distinct model spec (and settings), made on first use.
    The replay model reads the recorded run from `store`."""
    settings = settings or Settings()
    last = getattr(_LAST_ADAPTER, "last", None)  # a thread asks for its run's, turn after turn
    if last is not None and last[0] is spec and last[1] is settings:
        found: ModelAdapter = last[2]
        return found
    adapter = _adapter_for(spec, settings, store)
    _LAST_ADAPTER.last = (spec, settings, adapter)
    return adapter


_LAST_ADAPTER = threading.local()


def _adapter_for(spec: ModelSpec, settings: Settings, store: EventStore | None) -> ModelAdapter:
    seen = _BY_OBJECT.get((id(spec), settings))
    if seen is not None and seen[0] is spec:
        return seen[1]
    key = (spec.model_dump_json(), settings)
    adapter = _ADAPTERS.get(key)
    if adapter is None:
        adapter = make_adapter(spec, settings, store)
        _ADAPTERS.put(key, adapter, len(key[0]))
    _BY_OBJECT.put(
        (id(spec), settings), (spec, adapter), len(key[0])
    )  # holding spec keeps its id unique
    return adapter
