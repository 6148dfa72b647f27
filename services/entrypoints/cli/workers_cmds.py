"""`agentledger workers`: the pools of one tool set on one task queue, in this
process or in N supervised child processes, until SIGTERM; with a metrics port,
/metrics, /healthz and /readyz (the one command that imports prometheus). They
run no intake: `--pools intake` is `agentledger intake` (`intake_cmds`), which
loads no tool code, so it takes no --tools, --tool-path or --mcp."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentledger.events.commands import Pool
from agentledger.events.counted import counted
from agentledger.services.adapters.metrics.scrape import Served
from agentledger.services.adapters.metrics.server import LOOPBACK, OpsServer
from agentledger.services.adapters.tools import sandbox_probe
from agentledger.services.adapters.tools.toolset import ToolSet, ToolSetError, load_toolset
from agentledger.services.bootstrap import ALL_POOLS, Services, build_services
from agentledger.services.entrypoints import operations
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.parser import INTAKE_POOL
from agentledger.services.entrypoints.cli.run_cmds import worker_args
from agentledger.services.entrypoints.cli.supervise import Supervisor, signalled, wait_for_signal
from agentledger.services.entrypoints.reply import emit, fail, say
from agentledger.services.redis_urls import masked
from agentledger.services.session import Session
from agentledger.services.settings import Settings
from agentledger.services.structured_logs import child_args

if TYPE_CHECKING:  # imported when used: prometheus' storage and the MCP SDK
    from agentledger.services.adapters.metrics.instruments import Instruments
    from agentledger.services.adapters.tools.mcp.hub import McpHub


def workers(
    session: Session,
    *,
    modules: Sequence[str],
    paths: Sequence[str],
    queue: str,
    processes: int,
    pools: Sequence[str] = (),
    mcp: str | None = None,
    as_json: bool = False,
    metrics_port: int | None = None,
    metrics_host: str = LOOPBACK,
) -> int:
    pools = pools or [str(pool) for pool in ALL_POOLS]
    if INTAKE_POOL in pools:
        return _intake(session, modules, paths, mcp, processes, as_json, metrics_port, metrics_host)
    try:
        toolset = load_toolset(modules, paths)
    except ToolSetError as exc:
        return fail(exit_codes.USAGE, "bad tool set", str(exc), as_json)
    served = [Served(queue, pool) for pool in pools]
    metrics = None if metrics_port is None else (metrics_host, metrics_port)
    if processes > 1:
        if {"tools", "accept"} & set(pools):  # refuse here, not in a restart loop
            sandbox_probe.ready(
                session.settings, network_tools=sandbox_probe.network_tools(toolset)
            )
        args = [*worker_args(modules, paths, queue, mcp=mcp), "--pools", ",".join(pools)]
        return _parent(session, args, processes, metrics, served)
    return _serve(session, toolset, queue, pools, mcp, metrics, served, as_json)


@dataclass
class _Serving:
    """What one worker process runs until SIGTERM: its pools (`toolset` is the tool
    modules' `base` with the MCP servers' tools), the MCP hub, the metrics and the
    health beat."""

    services: Services
    base: ToolSet
    toolset: ToolSet
    hub: McpHub | None
    instruments: Instruments | None
    beat: operations.Beat | None

    def stop(self) -> None:
        self.services.stop()
        if self.hub is not None:
            self.hub.close()
        if self.beat is not None:
            self.beat.stop()
        if self.instruments is not None:
            self.instruments.stop()  # the last tallies, into the files a parent reads


def _serve(
    session: Session,
    base: ToolSet,
    queue: str,
    pools: Sequence[str],
    mcp: str | None,
    metrics: tuple[str, int] | None,
    served: list[Served],
    as_json: bool,
) -> int:
    """The pools in this process until SIGTERM, with the operations port when asked for."""
    serving = _start(session, base, queue, pools, mcp, metrics=metrics is not None)
    try:
        ops = (
            operations.serve_one(serving.services, session.client, metrics, served)
            if metrics is not None else None
        )  # fmt: skip
    except OSError as exc:
        serving.services.stop()
        if serving.hub is not None:
            serving.hub.close()
        return fail(exit_codes.USAGE, "bad option", operations.cannot_listen(metrics, exc), as_json)
    _say_dynamic(base, as_json)
    _say_no_key(
        session.settings, queue, pools
    )  # before "workers up": who reads that may stop us next
    _say_up(session.settings, serving, queue, pools, ops, as_json)
    wait_for_signal()
    if ops is not None:
        ops.stop()
    serving.stop()
    return 0


def _start(
    session: Session,
    base: ToolSet,
    queue: str,
    pools: Sequence[str],
    mcp: str | None,
    *,
    metrics: bool,
) -> _Serving:
    settings = session.settings
    instruments = None
    if metrics or settings.metrics_dir:
        from agentledger.services.adapters.metrics.instruments import Instruments

        instruments = Instruments().start()
    hub, toolset = None, base
    if mcp:
        from agentledger.services.entrypoints.cli.mcp_servers import start_hub

        hub = start_hub(mcp, settings)
        toolset = hub.toolset(base)
    services: Services = build_services(
        settings, session.client, toolset, queue=queue,
        pools=[p for p in ALL_POOLS if str(p) in pools], instruments=instruments,
    )  # fmt: skip
    services.start()
    if hub is not None:
        from agentledger.services.entrypoints.cli.mcp_servers import follow_servers

        follow_servers(services, hub, base)
    beat = operations.Beat(services, settings.metrics_dir).start() if settings.metrics_dir else None
    return _Serving(services, base, toolset, hub, instruments, beat)


def _say_up(
    settings: Settings,
    serving: _Serving,
    queue: str,
    pools: Sequence[str],
    ops: OpsServer | None,
    as_json: bool,
) -> None:
    """ "workers up": where, which queue, tool set and pools, with how many threads."""
    services, toolset = serving.services, serving.toolset
    threads = services.worker.worker_threads if services.worker is not None else 0
    by_pool = services.pool_threads()  # bounds: each pool's own budget
    if as_json:
        emit({
            "workers": "up", "threads": threads, "spare_threads": services.spare_threads(),
            "pool_threads": by_pool,
            "redis": masked(settings.redis_url or ""),
            "prefix": settings.prefix, "queue": queue, "toolset": toolset.fingerprint,
            "modules": list(toolset.modules), "pools": list(pools), "pid": os.getpid(),
            "dynamic": list(serving.base.dynamic),
            **({"metrics_port": ops.port, "metrics_host": ops.host} if ops else {}),
        })  # fmt: skip
    else:
        print(
            f"agentledger workers up on {masked(settings.redis_url or '')} (prefix "
            f"{settings.prefix!r}): queue {queue!r}, tool set {toolset.fingerprint} "
            f"({', '.join(toolset.modules) or 'built-in tools only'}), pools {', '.join(pools)}, "
            f"{counted(threads, 'thread')} ({', '.join(f'{p} {n}' for p, n in by_pool.items())})"
            + (f", metrics on {ops.where}" if ops else ""),
            flush=True,
        )


def _say_no_key(settings: Settings, queue: str, pools: Sequence[str]) -> None:
    """Once at start: the runs of `queue` whose model is anthropic cannot be served here
    (`submit` cannot know the workers' credentials; this worker can)."""
    if str(Pool.MODEL) in pools and not settings.anthropic_api_key:
        say(
            f"ANTHROPIC_API_KEY is not set for these workers: a run on queue {queue!r} whose "
            "model is anthropic fails at its first model request (scripted runs are served)"
        )


def _say_dynamic(toolset: ToolSet, as_json: bool) -> None:
    """A tool set whose import loaded modules its source does not name: its
    fingerprint is not the one `agentledger toolset` computes without importing."""
    if toolset.dynamic and not as_json:
        print(
            f"agentledger workers: importing the tool modules loaded {', '.join(toolset.dynamic)}, "
            f"which their source does not name: tool set {toolset.fingerprint} is what "
            "`agentledger toolset --load …` prints, not `agentledger toolset …`",
            file=sys.stderr, flush=True,
        )  # fmt: skip


def _intake(
    session: Session,
    modules: Sequence[str],
    paths: Sequence[str],
    mcp: str | None,
    processes: int,
    as_json: bool,
    metrics_port: int | None,
    metrics_host: str,
) -> int:
    """`--pools intake`: the intake alone, refusing what would load tool code."""
    if modules or paths or mcp:
        given = ", ".join(
            f for f, v in (("--tools", modules), ("--tool-path", paths), ("--mcp", mcp)) if v
        )
        why = (
            f"--pools {INTAKE_POOL} loads no tool code: drop {given} (the workers serve the tools)"
        )
        return fail(exit_codes.USAGE, "bad option", why, as_json)
    if processes != 1:
        why = f"--pools {INTAKE_POOL} is one process: run more of them (replicas) instead of --processes"
        return fail(exit_codes.USAGE, "bad option", why, as_json)
    from agentledger.services.entrypoints.cli.intake_cmds import intake

    return intake(session, as_json=as_json, metrics_port=metrics_port, metrics_host=metrics_host)


def _parent(
    session: Session,
    args: list[str],
    processes: int,
    metrics: tuple[str, int] | None,
    served: list[Served],
) -> int:
    """N worker processes kept alive (one that dies is started again); with a
    metrics port, this process serves their metrics."""
    stop = signalled()
    if metrics is None:
        supervisor = Supervisor(session.settings, [*child_args(), *args], processes)
        supervisor.keep_alive(stop)
        supervisor.stop()
        return 0
    from prometheus_client.multiprocess import mark_process_dead

    folder, clean = operations.metrics_dir(session.settings)
    supervisor = Supervisor(
        session.settings, [*child_args(), *args], processes,
        env={"PROMETHEUS_MULTIPROC_DIR": folder},
        on_death=lambda pid: mark_process_dead(pid, folder),  # type: ignore[no-untyped-call]
    )  # fmt: skip
    try:  # the server watches supervisor.children: the list the supervisor keeps current
        try:
            ops = operations.serve_parent(
                session.settings, session.client, supervisor.children, folder, metrics, served
            )
        except OSError as exc:
            return fail(
                exit_codes.USAGE, "bad option", operations.cannot_listen(metrics, exc), False
            )
        print(f"agentledger workers: {processes} processes, metrics on {ops.where}", flush=True)
        supervisor.keep_alive(stop)
        ops.stop()
    finally:
        supervisor.stop()
        clean()
    return 0
