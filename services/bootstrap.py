"""The composition root: builds the Redis client, the store, the clock, the model
adapters, the lock table, the ledger, the run repository and the worker pools
of one tool set from one Settings object. The intake is a role of its own, in a
process with no tool code (`agentledger.services.intake_role`)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dramatiq
import redis
from dramatiq.middleware import Middleware, Retries, ShutdownNotifications, TimeLimit

from agentledger.events import fold, snapshot
from agentledger.events.commands import Pool
from agentledger.services.adapters.archive.archive import open_archive
from agentledger.services.adapters.broker.budgets import Budgets, thread_budgets
from agentledger.services.adapters.broker.log_context import context_middleware
from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.broker.outbox import Outbox, Resend, send
from agentledger.services.adapters.broker.streams_broker import StreamsBroker
from agentledger.services.adapters.ledger.redis_ledger import RedisLedger
from agentledger.services.adapters.live_text import RedisLiveText
from agentledger.services.adapters.locks.redis_locks import RedisLocks
from agentledger.services.adapters.models.choice import model_for as model_for  # re-exported
from agentledger.services.adapters.redis.client import redis_client as redis_client  # re-exported
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.redis.shards import shards_ever as shards_ever  # re-exported
from agentledger.services.adapters.redis.worker_deaths import WorkerDeaths
from agentledger.services.adapters.run_caps.redis_lines import RedisRunLines
from agentledger.services.adapters.store.port import Outgoing
from agentledger.services.adapters.store.redacting import RedactingStore
from agentledger.services.adapters.store.redis_store import RedisEventStore
from agentledger.services.adapters.store.request_keys import RedisRequestKeys
from agentledger.services.adapters.tools import sandbox_probe
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.clock import SystemClock, worker_name
from agentledger.services.handlers.actors import declare_actors
from agentledger.services.handlers.app import App, Carrying
from agentledger.services.handlers.lines import Lines
from agentledger.services.handlers.runs import Observe, Runs
from agentledger.services.handlers.state_cache import cache_for, warm_up
from agentledger.services.handlers.turns import Turns
from agentledger.services.keys import keys_for
from agentledger.services.lock_partitions import lock_partitions
from agentledger.services.loops.retention import RetentionDuty
from agentledger.services.loops.sweeper import run_sweeper
from agentledger.services.process_memory import limit_arenas
from agentledger.services.secrets import configure as configure_secrets
from agentledger.services.secrets import stored_redactor
from agentledger.services.settings import Settings
from agentledger.services.structured_logs import set_worker

if TYPE_CHECKING:  # prometheus_client is imported only when metrics are on
    from agentledger.services.adapters.metrics.instruments import Instruments
    from agentledger.services.adapters.metrics.scrape import RedisCollector, Served

log = logging.getLogger(__name__)
ALL_POOLS = (Pool.MODEL, Pool.TOOLS, Pool.ACCEPT)


def worker_middleware() -> list[Middleware]:
    """What the actors use of dramatiq's middleware: time limits, shutdown notices
    (a tool told to stop), retries with back-off. Not age limits, callbacks or
    pipelines: each message would pay for their hooks and no actor uses them."""
    return [TimeLimit(), ShutdownNotifications(), Retries()]


def prepare_readers() -> None:
    """What a run's first load builds (the snapshot reader, the fold's copy functions),
    built before a worker's threads start, and a first pass over a run's load
    (`state_cache.warm_up`): not paid by the first step of its first run (a CLI
    command builds only what it uses). The intake builds the inbox message reader."""
    snapshot.prepare()
    fold.prepare()
    warm_up()


def redis_collector(
    settings: Settings, client: redis.Redis, served: Sequence[Served]
) -> RedisCollector:
    """What a metrics scrape reads from Redis (the operations port's collector)."""
    from agentledger.services.adapters.metrics.scrape import (
        RedisCollector,  # prometheus_client: metrics on
    )

    keys = keys_for(settings)
    shards = shards_ever(client, keys)
    cache = cache_for(RedisEventStore(client, keys))
    parts = dataclasses.replace(keys, lock_partitions=lock_partitions(client, keys, settings))
    locks = RedisLocks(client, parts, lease_s=settings.lock_lease_s)
    return RedisCollector(client, keys, lambda: shards, served, cache.load_many, locks.usage)


def redis_problem(client: redis.Redis) -> str | None:
    """Why Redis is not ready (None: it answers)."""
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"Redis does not answer: {exc}"
    return None


def build_app(
    settings: Settings,
    client: redis.Redis,
    toolset: ToolSet,
    *,
    worker: str | None = None,
    observe: Observe | None = None,
) -> App:
    keys = keys_for(settings)
    configure_secrets(settings)
    store = RedactingStore(
        RedisEventStore(
            client, keys, replica_acks=settings.replica_acks,
            event_max_bytes=settings.event_max_bytes,
        ),
        stored_redactor,
    )  # fmt: skip
    outbox = Outbox(keys)
    keys = dataclasses.replace(keys, lock_partitions=lock_partitions(client, keys, settings))
    locks = RedisLocks(
        client, keys, lease_s=settings.lock_lease_s, replica_acks=settings.replica_acks
    )
    clock = SystemClock()

    def push(messages: Sequence[Outgoing]) -> None:
        send(client, messages)

    cache = settings.state_cache_max_bytes
    caps = settings.max_live_runs_per_tenant
    lines = Lines(RedisRunLines(client, keys), caps) if caps else None
    runs = Runs(store, clock, outbox, locks, push, observe, cache_max_bytes=cache, lines=lines)
    return App(
        settings=settings,
        runs=runs,
        clock=clock,
        toolset=toolset,
        model_for=lambda spec: model_for(spec, settings, store),
        worker=worker or worker_name(),
        locks=locks,
        ledger=RedisLedger(
            client, keys, keep_s=settings.ledger_keep_s, replica_acks=settings.replica_acks
        ),
        outbox=outbox,
        send=push,
        resend=Resend(client, keys),
        dead_workers=WorkerDeaths(client, keys, member_ttl_s=settings.member_ttl_s),
        live_text=RedisLiveText(client, keys),
    )


@dataclass
class Services:
    """The worker pools of one tool set on one task queue, plus the sweeper loop, in
    one process (no intake: that role loads no tool code, `agentledger.services.intake_role`)."""

    app: App
    client: redis.Redis
    broker: StreamsBroker
    directory: Directory
    queue: str
    pools: tuple[Pool, ...]
    worker: dramatiq.Worker | None = None
    instruments: Instruments | None = None  # metrics, when they are on
    stop_flag: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    loop_members: list[Membership] = field(default_factory=list)  # the sweeper's
    tracing: Any = (
        None  # agentledger.services.adapters.tracing.otel.Tracing, when traces are exported
    )
    trace_export: Any = None  # its loop (agentledger.services.loops.trace_export.TraceExport)
    retool_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, *, loops: bool = True) -> None:
        limit_arenas(self.app.settings.malloc_arenas)  # before the pools' threads start
        prepare_readers()
        self.worker = self._serve(self.app.toolset)
        # dramatiq's own CLI emits process_boot; TimeLimit starts its watchdog on it
        self.broker.emit_after("process_boot")
        self.worker.start()
        if loops:
            self._start_loops()

    def _serve(self, toolset: ToolSet) -> dramatiq.Worker:
        """Register the tool set under the queue and a dramatiq worker for its pools."""
        self.directory.register(self.queue, toolset.fingerprint, toolset.manifest())
        names = declare_actors(
            self.broker, lambda: self.app, queue=self.queue, toolset=toolset.fingerprint,
            pools=self.pools,
        )  # fmt: skip
        return dramatiq.Worker(
            self.broker, queues=set(names), worker_threads=self.worker_threads(),
            worker_timeout=100,
        )  # fmt: skip

    def pool_threads(self) -> dict[str, int]:
        """Each served pool's thread budget."""
        budgets = self.broker.budgets
        names = [str(p) for p in self.pools]
        return {p: budgets.size(p) for p in names if budgets.serves(p)} if budgets else {}

    def spare_threads(self) -> int:
        """Of `worker_threads`, those of the pools' spare slots (another tenant's first step)."""
        budgets = self.broker.budgets
        if budgets is None:
            return 0
        return sum(budgets.spare(str(p)) for p in self.pools if budgets.serves(str(p)))

    def worker_threads(self) -> int:
        """The threads the pools need: the sum of their budgets (each has its own) and
        of their spare slots."""
        budgets = self.broker.budgets
        if budgets is None:
            return self.app.settings.worker_threads
        served = [str(p) for p in self.pools if budgets.serves(str(p))]
        return max(1, sum(budgets.size(p) + budgets.spare(p) for p in served))

    def retool(self, toolset: ToolSet) -> None:
        """Serve the task queue with another tool set (an MCP server went down or
        came back): the handlers see it at once; the pools stop taking the old
        fingerprint's commands (finishing what they hold) and take the new one's."""
        with self.retool_lock:
            if self.stop_flag.is_set():
                return
            if self.worker is None or toolset.fingerprint == self.app.toolset.fingerprint:
                self.app = dataclasses.replace(self.app, toolset=toolset)
                return
            carrying = self.app.carrying  # deliveries under way stop carrying the old tool set
            fresh = (
                dataclasses.replace(
                    carrying, stopping=threading.Event(), turns=carrying.turns.fresh()
                )
                if carrying
                else None
            )
            self.app = dataclasses.replace(self.app, toolset=toolset, carrying=fresh)
            if carrying is not None:
                carrying.stopping.set()
            self.worker.stop(timeout=30_000)
            for actor in list(self.broker.actors):  # declared again below, on the new queues
                self.broker.actors.pop(actor)
            self.worker = self._serve(toolset)
            self.worker.start()
            log.warning("serving tool set %s (MCP servers changed)", toolset.fingerprint)

    def _start_loops(self) -> None:
        keys = self.broker.keys
        ttl = self.app.settings.member_ttl_s
        sweep = Membership(self.client, keys.members("sweep"), self.broker.worker_id, ttl_s=ttl)
        self.loop_members.append(sweep)
        shards = self.broker.shards
        retention = self._retention()
        self._spawn(
            "sweeper", lambda: run_sweeper(self.app, sweep, shards, self.stop_flag, retention)
        )
        if self.app.settings.otlp_traces:
            self._start_trace_export(shards)

    def _retention(self) -> RetentionDuty | None:
        """The sweeper's retention duty (None: AGENTLEDGER_ARCHIVE_URL=off)."""
        settings = self.app.settings
        archive = open_archive(settings.archive_url, settings.state_dir, settings.prefix)
        if archive is None:
            return None
        requests = RedisRequestKeys(self.client, keys_for(settings))
        return RetentionDuty(self.app.store, archive, requests, settings, self.app.clock)

    def _start_trace_export(self, shards: range) -> None:
        """OTEL_EXPORTER_OTLP_* set: the runs' spans go out live, with the model SDK's."""
        from agentledger.services.adapters.tracing.otel import (
            install,  # the SDK only when asked for
        )
        from agentledger.services.loops.trace_export import TraceExport

        self.tracing = install()
        export = TraceExport(
            self.client, self.broker.keys, RedisEventStore(self.client, self.broker.keys),
            self.tracing, shards=shards, consumer=self.broker.worker_id,
        )  # fmt: skip
        self.trace_export = export
        self._spawn("traces", lambda: export.run(self.stop_flag))

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

    def problem(self) -> str | None:
        """None while every thread this process needs is alive; else which is not."""
        if self.worker is None:
            return "the worker pools are not started"
        dead = [q for q, c in self.worker.consumers.items() if not c.is_alive()]
        dead += [t.name for t in self.worker.workers if not t.is_alive()]
        dead += [t.name for t in self.threads if not t.is_alive()]
        if self.stop_flag.is_set():
            return "stopping"
        return f"not running: {', '.join(sorted(dead))}" if dead else None

    def unready(self) -> str | None:
        """Why this process is alive but not ready: nothing beyond `problem`."""
        return self.problem()

    def stop(self) -> None:
        # the loops see the flag once their current read returns: the pools stop
        # meanwhile, not after; a delivery that
        # carries a run on stops carrying (what is due next goes through the queue)
        self.stop_flag.set()
        if self.app.carrying is not None:
            self.app.carrying.stopping.set()
        with self.retool_lock:
            if self.worker is not None:
                self.worker.stop(timeout=5000)
        for thread in self.threads:
            thread.join(timeout=5)
        # else the shards we swept wait `member_ttl_s` for another sweeper
        for member in self.loop_members:
            member.leave()
        if self.tracing is not None:  # what the last steps ended, before the process goes
            self.trace_export.once()
            self.tracing.flush()
        self.broker.leave()


def pool_threads(settings: Settings, pools: Iterable[Pool]) -> dict[str, int]:
    """Each served pool's own thread budget (`agentledger.services.adapters.broker.budgets`)."""
    given = {
        "model": settings.model_threads,
        "tools": settings.tools_threads,
        "accept": settings.accept_threads,
    }
    return thread_budgets(settings.worker_threads, [str(p) for p in pools], given)


def build_services(
    settings: Settings,
    client: redis.Redis,
    toolset: ToolSet,
    *,
    queue: str,
    pools: Iterable[Pool] = ALL_POOLS,
    instruments: Instruments | None = None,
) -> Services:
    """`instruments`: count every step (metrics)."""
    pools = tuple(pools)
    if {Pool.TOOLS, Pool.ACCEPT} & set(pools):  # they run commands: a broken sandbox refuses here
        sandbox_probe.ready(settings, network_tools=sandbox_probe.network_tools(toolset))
    keys = keys_for(settings)
    worker = worker_name()
    set_worker(worker)
    observe = instruments.observe_step if instruments is not None else None
    app = build_app(settings, client, toolset, worker=worker, observe=observe)
    spares = {p: 1 for p in settings.tenant_spare.split(",") if p and p != "none"}
    budgets = Budgets(pool_threads(settings, pools), spares=spares)
    turns: Turns[Any] = Turns(shared_s=settings.carry_shared_s, messages=budgets.waiting)
    carrying = Carrying(queue, frozenset(pools), for_s=settings.carry_s, turns=turns)
    app = dataclasses.replace(app, carrying=carrying)
    extra = [
        *context_middleware(),
        *([instruments.step_timer()] if instruments is not None else []),
    ]
    broker = StreamsBroker(
        client,
        keys,
        worker_id=worker,
        shards=shards_ever(client, keys),
        claim_idle_ms=int(settings.broker_claim_idle_s * 1000),
        max_deliveries=settings.broker_max_deliveries,
        member_ttl_s=settings.member_ttl_s,
        middleware=[*worker_middleware(), *extra],
        budgets=budgets,
        read_ahead=settings.read_ahead,
    )
    dramatiq.set_broker(broker)
    directory = Directory(client, keys, member_ttl_s=settings.member_ttl_s)
    services = Services(app, client, broker, directory, queue, pools, instruments=instruments)
    if instruments is not None:
        instruments.pool_threads(services.pool_threads())
    return services
