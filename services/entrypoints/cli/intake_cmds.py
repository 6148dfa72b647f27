"""`agentledger intake` (and `workers --pools intake`): the intake alone in this
process — signatures, grants and spec checks, no tool code, no worker pool —
until SIGTERM; with a metrics port, /metrics, /healthz and /readyz (not ready
while the publishers file is not the deployment's). It refuses to start with a
publishers file other than the one the deployment records."""

from __future__ import annotations

import os

from agentledger.events.counted import counted
from agentledger.services.adapters.metrics.server import LOOPBACK, OpsServer
from agentledger.services.entrypoints import operations
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.supervise import wait_for_signal
from agentledger.services.entrypoints.reply import emit, fail
from agentledger.services.intake_role import IntakeService, build_intake
from agentledger.services.redis_urls import masked
from agentledger.services.session import Session
from agentledger.services.settings import Settings


def intake(
    session: Session,
    *,
    as_json: bool,
    metrics_port: int | None = None,
    metrics_host: str = LOOPBACK,
) -> int:
    settings = session.settings
    instruments = None
    if metrics_port is not None or settings.metrics_dir:
        from agentledger.services.adapters.metrics.instruments import Instruments

        instruments = Instruments().start()
    service = build_intake(settings, session.client, instruments=instruments)
    service.start()
    beat = operations.Beat(service, settings.metrics_dir).start() if settings.metrics_dir else None
    metrics = None if metrics_port is None else (metrics_host, metrics_port)
    try:
        ops = (
            operations.serve_one(service, session.client, metrics, [])
            if metrics is not None else None
        )  # fmt: skip
    except OSError as exc:
        service.stop()
        return fail(exit_codes.USAGE, "bad option", operations.cannot_listen(metrics, exc), as_json)
    _say_up(service, settings, ops, as_json)
    wait_for_signal()
    if ops is not None:
        ops.stop()
    service.stop()
    if beat is not None:
        beat.stop()
    if instruments is not None:
        instruments.stop()
    return 0


def _say_up(
    service: IntakeService, settings: Settings, ops: OpsServer | None, as_json: bool
) -> None:
    """The intake's first words: where it listens, its publishers file and digest."""
    registry = service.intake.registry
    names = sorted(registry.current().publishers)
    if as_json:
        emit({
            "intake": "up", "redis": masked(settings.redis_url or ""), "prefix": settings.prefix,
            "publishers_file": registry.path, "publishers_digest": registry.digest(),
            "publishers": names, "pid": os.getpid(),
            **({"metrics_port": ops.port, "metrics_host": ops.host} if ops else {}),
        })  # fmt: skip
    else:
        print(
            f"agentledger intake up on {masked(settings.redis_url or '')} (prefix "
            f"{settings.prefix!r}): publishers file {registry.path} (sha256 "
            f"{registry.digest()[:12]}), {counted(len(names), 'publisher')}, "
            f"{counted(settings.inbox_partitions, 'inbox partition')}"
            + (f", metrics on {ops.where}" if ops else ""),
            flush=True,
        )
