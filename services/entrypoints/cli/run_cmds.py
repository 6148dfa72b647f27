"""`agentledger run SPEC`, embedded: a private task queue served by workers in this
process or its children, and an intake in this process that reads only its own
publisher's streams; the run is followed to its end (`follow_run.to_the_end`,
which `run --attach` shares: `attach_cmds`). With `--processes N` the run's
workers are child `agentledger workers` (`workers_cmds`)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentledger.events.mcp_policy import modules_of
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.adapters.tools.toolset import ToolSet
from agentledger.services.entrypoints.cli.children import die_with_parent
from agentledger.services.entrypoints.cli.embedded import (
    PRIVATE_PREFIX,
    attach_command,
    command,
    is_private,
)
from agentledger.services.entrypoints.cli.follow_run import Then, to_the_end
from agentledger.services.entrypoints.cli.prepare import Prepared, request_for
from agentledger.services.entrypoints.cli.publisher_cmds import check_grant, local_signer
from agentledger.services.entrypoints.cli.supervise import stop_children
from agentledger.services.entrypoints.controls import signer_for
from agentledger.services.handlers.spec_check import tool_paths
from agentledger.services.session import Session
from agentledger.services.settings import Settings, environ_for_children
from agentledger.services.structured_logs import child_args


def private_queue() -> str:
    """The task queue of one embedded `run`: nobody else's workers serve it."""
    return f"{PRIVATE_PREFIX}{uuid.uuid4().hex[:12]}"


def run(
    session: Session,
    prepared: Prepared,
    *,
    as_json: bool,
    processes: int,
    queue: str | None,
    as_: str | None = None,
) -> int:
    """Run on embedded workers and follow (`to_the_end`)."""
    assert prepared.toolset is not None
    spec, toolset = prepared.spec, prepared.toolset
    queue = queue or private_queue()
    # its own, filed on first need
    signer = signer_for(session.settings, as_) if as_ else local_signer(session)
    check_grant(session.settings, signer, spec.principal, queue)
    request = request_for(
        spec, prepared.base_dir, session.settings, queue=queue, toolset=toolset.fingerprint
    )
    run_id = request.run_id
    assert run_id is not None
    stop_workers = start_workers(
        session, toolset, spec, prepared.base_dir, queue=queue, processes=processes,
        prepared=prepared, publisher=signer.name,
    )  # fmt: skip
    embedded = is_private(queue) and signer.name == local_name(session.settings.state_dir)
    workers = worker_args(
        modules_of(spec.tools), tool_paths(spec, prepared.base_dir), queue, mcp=prepared.mcp
    )
    then = Then(attach_command(run_id) if embedded else command(*workers), as_)
    return to_the_end(
        session, run_id, signer, stop_workers, request=request, as_json=as_json, then=then
    )


def start_workers(
    session: Session,
    toolset: ToolSet,
    spec: RunSpec,
    base_dir: str | None,
    *,
    queue: str,
    processes: int,
    publisher: str,
    prepared: Prepared | None = None,
) -> Callable[[], None]:
    """Worker pools for the spec's tool set on `queue`, in this process (processes=0)
    or in child processes (which start the MCP servers of their own); and, in this
    process, an intake of `publisher`'s streams alone (the embedded run's own)."""
    from agentledger.services.intake_role import build_intake  # dramatiq: `submit` needs none of it

    intake = build_intake(session.settings, session.client, only=publisher).start()
    hub = prepared.hub if prepared is not None else None
    if processes <= 0:
        from agentledger.services.bootstrap import build_services

        services = build_services(session.settings, session.client, toolset, queue=queue)
        services.start()
        if hub is not None and prepared is not None and prepared.base is not None:
            from agentledger.services.entrypoints.cli.mcp_servers import follow_servers

            follow_servers(services, hub, prepared.base)

        def stop() -> None:
            services.stop()
            intake.stop()
            if hub is not None:
                hub.close()

        return stop
    mcp = prepared.mcp if prepared is not None else None
    args = worker_args(modules_of(spec.tools), tool_paths(spec, base_dir), queue, mcp=mcp)
    if hub is not None:
        hub.close()  # the children start their own
    children = spawn_workers(session.settings, args, processes)

    def stop_all() -> None:
        children()
        intake.stop()

    return stop_all


def worker_args(
    modules: Sequence[str], paths: Sequence[str], queue: str, *, mcp: str | None = None
) -> list[str]:
    args = ["workers", "--queue", queue]
    if modules:
        args += ["--tools", *modules]
    for path in paths:
        args += ["--tool-path", path]
    if mcp:
        args += ["--mcp", str(Path(mcp).resolve())]
    return args


def spawn_workers(
    settings: Settings, args: list[str], processes: int, *, env: dict[str, str] | None = None
) -> Children:
    """Worker processes in a session of their own (Ctrl-C in a terminal reaches only
    us, and we stop them in order); they die with us if we are killed; their notes
    go to our stderr, in our log level and format."""
    environ = {**environ_for_children(settings), **(env or {})}
    command = [
        sys.executable,
        "-m",
        "agentledger.services.entrypoints.cli.main",
        *child_args(),
        *args,
    ]
    return Children([
        subprocess.Popen(
            command, env=environ, stdin=subprocess.DEVNULL, stdout=sys.stderr,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        for _ in range(processes)
    ])  # fmt: skip


@dataclass
class Children:
    procs: list[subprocess.Popen[bytes]]

    def __call__(self) -> None:
        """Stop them: SIGTERM, then SIGKILL whoever is still there after 15 s."""
        stop_children(self.procs)
