"""Metrics and health for `agentledger workers` and `agentledger intake`. One process: its own counters
plus what a scrape reads from Redis, served on `--metrics-port`. With
`--processes N` the parent serves: it gives its children a prometheus_client
multiprocess folder (`PROMETHEUS_MULTIPROC_DIR`: ours, made and removed here,
unless the environment names one, which is emptied first), each child counts
into it and beats a health file there, and the parent adds them up.

Liveness (`/healthz`): every worker process alive, its pools' threads alive,
its beat fresh. Readiness (`/readyz`): that, every process has beaten once,
nothing holds it back (an intake whose publishers file is not the
deployment's), and Redis answers."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentledger.services.adapters.metrics.scrape import Served
from agentledger.services.adapters.metrics.server import OpsServer
from agentledger.services.bootstrap import redis_collector, redis_problem
from agentledger.services.handlers.app import App
from agentledger.services.settings import Settings

if TYPE_CHECKING:
    import redis

    from agentledger.services.adapters.metrics.instruments import Instruments

BEAT_S = 1.0
SILENT_S = 15.0  # a process whose beat is older than this is not alive
FIRST_BEAT_S = 60.0  # how long a new process may take to beat the first time


class Process(Protocol):
    """What the operations port asks of a process: workers' `Services`, an `IntakeService`."""

    @property
    def app(self) -> App: ...
    @property
    def instruments(self) -> Instruments | None: ...
    def problem(self) -> str | None: ...  # liveness
    def unready(self) -> str | None: ...  # readiness (what `problem` says, and more)


def metrics_dir(settings: Settings) -> tuple[str, Callable[[], None]]:
    """The multiprocess folder for children, and how to clean it up after them."""
    if settings.metrics_dir:
        folder = Path(settings.metrics_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for old in [*folder.glob("*.db"), *folder.glob("health-*")]:
            old.unlink(missing_ok=True)  # values of processes before ours would add up
        return str(folder), lambda: None
    made = tempfile.mkdtemp(prefix="agentledger-metrics-")
    return made, lambda: shutil.rmtree(made, ignore_errors=True)


def serve_one(
    services: Process, client: redis.Redis, at: tuple[str, int], served: Sequence[Served]
) -> OpsServer:
    """The operations port of a single worker process."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    settings = services.app.settings
    if settings.metrics_dir:  # the values live in the folder: read them from there
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=settings.metrics_dir)  # type: ignore[no-untyped-call]
    else:
        assert services.instruments is not None
        registry = services.instruments.registry
    registry.register(redis_collector(settings, client, served))

    def ready() -> str | None:
        return services.unready() or redis_problem(client)

    host, port = at
    return OpsServer(registry, host=host, port=port, live=services.problem, ready=ready).start()


@dataclass
class Beat:
    """A child's health file, beaten every second with its problem or 'ok'."""

    services: Process
    folder: str
    stop_flag: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Beat:
        threading.Thread(target=self._run, name="agentledger-health", daemon=True).start()
        return self

    def _run(self) -> None:
        path = Path(self.folder, f"health-{os.getpid()}")
        while not self.stop_flag.is_set():
            tmp = path.with_suffix(".tmp")
            tmp.write_text(self.services.problem() or "ok")
            tmp.replace(path)
            self.stop_flag.wait(BEAT_S)
        path.unlink(missing_ok=True)

    def stop(self) -> None:
        self.stop_flag.set()


def serve_parent(
    settings: Settings,
    client: redis.Redis,
    children: Sequence[subprocess.Popen[bytes]],
    folder: str,
    at: tuple[str, int],
    served: Sequence[Served],
) -> OpsServer:
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    registry.register(redis_collector(settings, client, served))
    started = time.monotonic()

    def problem(*, first_beat_s: float) -> str | None:
        for child in children:
            if (code := child.poll()) is not None:
                return f"worker process {child.pid} exited ({code})"
            beat = Path(folder, f"health-{child.pid}")
            try:
                age, said = time.time() - beat.stat().st_mtime, beat.read_text()
            except FileNotFoundError:
                if time.monotonic() - started > first_beat_s:
                    return f"worker process {child.pid} never beat"
                continue
            if age > SILENT_S:
                return f"worker process {child.pid} silent for {age:.0f}s"
            if said != "ok":
                return f"worker process {child.pid}: {said}"
        return None

    def ready() -> str | None:
        return problem(first_beat_s=0.0) or redis_problem(client)

    host, port = at
    return OpsServer(
        registry, host=host, port=port, live=lambda: problem(first_beat_s=FIRST_BEAT_S), ready=ready
    ).start()


def cannot_listen(metrics: tuple[str, int] | None, exc: OSError) -> str:
    """The one line said when the operations port cannot be opened."""
    host, port = metrics or ("", 0)
    return f"--metrics-host/--metrics-port: cannot listen on {host}:{port}: {exc.strerror or exc}"
