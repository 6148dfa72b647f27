"""The composition of the intake role: the one process (`agentledger intake`, or
`workers --pools intake`) that decides what runs exist — signatures, grants,
spec checks — and loads no tool code: its app has no tool set (no tool module,
not even the built-in tools, is imported) and it starts no dramatiq pool. It
reads the run repository, the directory of tool-set manifests the workers
registered and the publishers file.

A deployment intake reads the streams of every publisher in its file, and only
while the file is the deployment's (`agentledger.services.loops.agreement`): at its start it
records the file's digest when none is recorded, and refuses to start with
another file. The embedded run's intake (`only`) reads its own publisher's
streams alone, in a membership group of that publisher (it never owns a
deployment's partitions), and neither records nor checks the digest."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import redis

from agentledger.services.adapters.broker.membership import Membership
from agentledger.services.adapters.publishers.publishers_file import VARIABLE, Registry
from agentledger.services.adapters.redis.directory import Directory
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.bootstrap import build_app
from agentledger.services.clock import worker_name
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.app import App
from agentledger.services.keys import keys_for
from agentledger.services.loops import inbox_parse
from agentledger.services.loops.agreement import Agreement
from agentledger.services.loops.intake import BEATS_PER_TTL, Intake
from agentledger.services.prices_file import operator_prices
from agentledger.services.settings import Settings
from agentledger.services.structured_logs import set_worker

if TYPE_CHECKING:
    from agentledger.services.adapters.metrics.instruments import Instruments

log = logging.getLogger(__name__)
NO_TOOLS = ToolSet(modules=(), fingerprint="", tools={})  # the intake runs no tool


@dataclass
class IntakeService:
    """One intake loop in this process (with its membership), until `stop`."""

    app: App
    intake: Intake
    membership: Membership
    instruments: Instruments | None = None
    stop_flag: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> IntakeService:
        inbox_parse.prepare()

        def guarded() -> None:
            while not self.stop_flag.is_set():
                try:
                    self.intake.run(self.stop_flag)
                except redis.ConnectionError as exc:
                    log.warning("intake lost Redis (%s); retrying", exc)
                    self.stop_flag.wait(0.5)
                except Exception:  # a supervisor: an intake that dies silently takes no run
                    log.exception("intake failed; starting it again")
                    self.stop_flag.wait(1.0)

        thread = threading.Thread(target=guarded, name="agentledger-intake", daemon=True)
        thread.start()
        self.threads.append(thread)
        return self

    def problem(self) -> str | None:
        """None while the intake loop is alive (liveness)."""
        if self.stop_flag.is_set():
            return "stopping"
        dead = [t.name for t in self.threads if not t.is_alive()]
        return f"not running: {', '.join(dead)}" if dead or not self.threads else None

    def unready(self) -> str | None:
        """Why this intake takes no entry now though alive (readiness): its publishers
        file is not the deployment's."""
        return self.problem() or self.intake.held

    def stop(self) -> None:
        self.stop_flag.set()
        for thread in self.threads:
            thread.join(timeout=5)
        self.membership.leave()  # the others take our partitions at their next beat


def build_intake(
    settings: Settings,
    client: redis.Redis,
    *,
    only: str | None = None,
    instruments: Instruments | None = None,
    worker: str | None = None,
) -> IntakeService:
    """The intake of a deployment (`only` None), or the embedded run's for publisher
    `only`. ConfigError when a deployment's file is broken, or not the one it records."""
    keys = keys_for(settings)
    worker = worker or worker_name()
    operator_prices(settings)  # a broken price table refuses to start, naming it
    if only is None:  # a process of its own: its log lines name it (the embedded run's, its pools)
        set_worker(worker)
    observe = instruments.observe_step if instruments is not None else None  # RunCreated, controls
    app = build_app(settings, client, NO_TOOLS, worker=worker, observe=observe)
    registry = Registry(settings.publishers_path)
    agreement = None
    if only is None:
        file, _ = registry.snapshot()
        if isinstance(file, ConfigError):  # a broken file is never the one a deployment agrees to
            raise file
        every_s = settings.member_ttl_s / BEATS_PER_TTL
        agreement = Agreement(client, keys, settings.publishers_path, every_s=every_s)
        if (held := agreement.check(registry.digest())) is not None:
            raise ConfigError(VARIABLE, held)
    membership = Membership(client, keys.intake_members(only), worker, ttl_s=settings.member_ttl_s)
    directory = Directory(client, keys, member_ttl_s=settings.member_ttl_s)
    rejected: Callable[[], None] | None = instruments.rejected_inc if instruments else None
    intake = Intake(
        app, client, keys, directory, membership, registry, rejected, only=only, agreement=agreement
    )
    return IntakeService(app, intake, membership, instruments)
