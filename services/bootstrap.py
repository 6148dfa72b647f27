"""The composition root: builds the Redis client, the store, the clock, the
model adapters and the worker pools from one Settings object."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import dramatiq
import redis

from schemas.spec import AnthropicModel, ModelSpec, ReplayModel, ScriptedModel
from services.adapters.broker.make import make_broker
from services.adapters.ledger.redis_ledger import Ledger
from services.adapters.locks.redis_locks import LockService
from services.adapters.models.port import ModelAdapter
from services.adapters.models.replay import ReplayAdapter
from services.adapters.models.scripted import ScriptedAdapter
from services.adapters.redis.client import redis_client as redis_client  # re-exported
from services.adapters.store.port import EventStore
from services.adapters.store.redacting import RedactingStore
from services.adapters.store.redis_store import RedisEventStore
from services.adapters.tools.registry import REGISTRY
from services.clock import SystemClock, worker_name
from services.entrypoints.actors import Pools, declare_actors
from services.handlers.app import App
from services.keys import Keys
from services.loops.intake import Intake
from services.loops.reactor import Reactor
from services.loops.sweeper import run_sweeper
from services.secrets import redactor_for
from services.settings import Settings

log = logging.getLogger(__name__)


_ADAPTERS: dict[tuple[str, Settings], ModelAdapter] = {}


def model_for(
    spec: ModelSpec, settings: Settings | None = None, store: EventStore | None = None
) -> ModelAdapter:
    """One adapter per distinct model spec (and settings), made on first use.
    The replay model reads the recorded run from `store`."""
    settings = settings or Settings()
    key = (spec.model_dump_json(), settings)
    adapter = _ADAPTERS.get(key)
    if adapter is None:
        adapter = _ADAPTERS[key] = _make_adapter(spec, settings, store)
    return adapter


def _make_adapter(spec: ModelSpec, settings: Settings, store: EventStore | None) -> ModelAdapter:
    match spec:
        case ScriptedModel():
            return ScriptedAdapter(spec)
        case ReplayModel():
            if store is None:
                raise ValueError("the replay model needs the event store")
            recorded = spec.replay.run_id
            return ReplayAdapter(recorded, lambda: store.read(recorded))
        case AnthropicModel():
            # imported here: the SDK takes seconds to import, and scripted runs never need it
            from services.adapters.models.anthropic_adapter import AnthropicAdapter

            return AnthropicAdapter(
                spec.anthropic,
                api_key=settings.anthropic_api_key,
                base_url=settings.anthropic_base_url,
                lease_s=settings.model_lease_s,
            )


def build_app(settings: Settings, client: redis.Redis) -> App:
    keys = Keys(settings.prefix, settings.shards)
    store = RedactingStore(RedisEventStore(client, keys), redactor_for)
    return App(
        settings=settings,
        store=store,
        clock=SystemClock(),
        registry=REGISTRY,
        model_for=lambda spec: model_for(spec, settings, store),
        worker=worker_name(),
        locks=LockService(client, settings.prefix, lease_s=settings.lock_lease_s),
        ledger=Ledger(client, settings.prefix, keep_s=settings.ledger_keep_s),
    )


@dataclass
class Services:
    """The worker pools plus the reactor, intake and sweeper loops of one process."""

    app: App
    client: redis.Redis
    pools: Pools
    broker: dramatiq.Broker
    worker: dramatiq.Worker | None = None
    stop_flag: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self, *, queues: set[str] | None = None, loops: bool = True) -> None:
        threads = self.app.settings.worker_threads
        self.worker = dramatiq.Worker(
            self.broker, queues=queues, worker_threads=threads, worker_timeout=100
        )
        # dramatiq's own CLI emits process_boot; TimeLimit starts its watchdog on it
        self.broker.emit_after("process_boot")
        self.worker.start()
        if loops:
            keys = Keys(self.app.settings.prefix, self.app.settings.shards)
            batch = getattr(self.broker, "batched", nullcontext)  # ours pipelines the sends
            reactor = Reactor(self.app, self.client, keys, self.pools.send, batch)
            intake = Intake(self.app, self.client, keys)
            self._spawn("reactor", lambda: reactor.run(self.stop_flag))
            self._spawn("intake", lambda: intake.run(self.stop_flag))
            self._spawn("sweeper", lambda: run_sweeper(self.app, self.pools.send, self.stop_flag))

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        def guarded() -> None:
            while not self.stop_flag.is_set():
                try:
                    target()
                except redis.ConnectionError as exc:
                    log.warning("%s lost Redis (%s); retrying", name, exc)
                    self.stop_flag.wait(0.5)
                except Exception:  # a supervisor: a loop that dies silently stops every run
                    log.exception("%s failed; starting it again", name)
                    self.stop_flag.wait(1.0)

        thread = threading.Thread(target=guarded, name=f"agentledger-{name}", daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self) -> None:
        self.stop_flag.set()
        for thread in self.threads:
            thread.join(timeout=5)
        if self.worker is not None:
            self.worker.stop(timeout=5000)


def build_services(settings: Settings, client: redis.Redis) -> Services:
    app = build_app(settings, client)
    broker = make_broker(client, Keys(settings.prefix, settings.shards), settings)
    pools = declare_actors(broker, lambda: app)
    return Services(app=app, client=client, pools=pools, broker=broker)
