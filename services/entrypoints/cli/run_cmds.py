"""Commands that start work: run (embedded: a private task queue served by workers
in this process or its children, follows the run to its end), submit (publish
to a shared task queue) and workers (the pools of one tool set, on one queue)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from events.commands import Pool
from events.fold import apply
from events.state import RunState
from events.status import RunStatus
from events.types import DEFAULT_QUEUE, ApprovalRequested
from schemas.errors import InvalidSpec
from schemas.inbox import RunRequested
from schemas.spec import RunSpec
from services.adapters.redis.directory import Directory
from services.adapters.tools.toolset import ToolSet, ToolSetError, fingerprint_of, load_toolset
from services.bootstrap import ALL_POOLS, Services, build_services
from services.clock import new_run_id
from services.entrypoints.cli import exit_codes
from services.entrypoints.cli.describe import line
from services.entrypoints.cli.inspect_cmds import run_summary
from services.entrypoints.cli.redacted import RunRedactors
from services.entrypoints.cli.session import Session
from services.entrypoints.cli.spec_file import load_spec_file
from services.handlers.spec_check import check_spec, tool_paths
from services.loops.intake import publish
from services.secrets import redactor_for
from services.settings import Settings, environ_for_children


def private_queue() -> str:
    """The task queue of one embedded `run`: nobody else's workers serve it."""
    return f"run.{uuid.uuid4().hex[:12]}"


def toolset_of(spec: RunSpec, base_dir: str | None) -> ToolSet:
    try:
        return load_toolset(spec.tools, tool_paths(spec, base_dir))
    except ToolSetError as exc:
        raise InvalidSpec(f"tools.{_index(spec, exc.module)}", exc.reason) from None


def request_for(
    spec: RunSpec, base_dir: str | None, settings: Settings, *, queue: str, toolset: str
) -> RunRequested:
    """A request for a new run of `spec` (its workspace copied if it asks)."""
    shard = uuid.uuid4().int % settings.shards
    run_id = new_run_id(shard)
    workspace = str(Path(base_dir, spec.workspace).resolve()) if spec.workspace and base_dir else None
    if workspace and spec.copy_workspace:
        copy = Path(settings.state_dir, "workspaces", run_id).resolve()
        # copy links as links: following them would put files from outside the
        # workspace inside the copy (and loop forever on a link to an ancestor)
        shutil.copytree(workspace, copy, symlinks=True)
        workspace = str(copy)
    return RunRequested(
        run_id=run_id, request_id=run_id, spec=spec, base_dir=base_dir, workspace=workspace,
        queue=queue, toolset=toolset,
    )  # fmt: skip


def run(
    session: Session, spec_path: str, *, as_json: bool, processes: int, queue: str | None
) -> int:
    spec, base_dir = load_spec_file(spec_path)
    toolset = toolset_of(spec, base_dir)
    check_spec(spec, base_dir, toolset=toolset)
    queue = queue or private_queue()
    stop_workers = start_workers(session, toolset, spec, base_dir, queue=queue, processes=processes)
    try:
        request = request_for(spec, base_dir, session.settings, queue=queue, toolset=toolset.fingerprint)
        assert request.run_id is not None
        publish(session.client, session.keys, request)
        state = follow(session, request.run_id, quiet=as_json)
    finally:
        stop_workers()
    redact = redactor_for(state.spec)
    if as_json:
        print(json.dumps(redact.value(run_summary(state))))
    else:
        print(f"\nrun {state.run_id}: {state.status}  {redact.text(state.detail)}")
        if state.status is RunStatus.AWAITING_HUMAN:
            print(f"  the run waits for a human; see `agentledger status {state.run_id}`")
    return exit_codes.for_status(state.status)


def submit(session: Session, spec_path: str, *, queue: str | None, unserved_ok: bool) -> int:
    spec, base_dir = load_spec_file(spec_path)
    queue = queue or spec.queue or DEFAULT_QUEUE
    try:
        fingerprint = fingerprint_of(spec.tools, tool_paths(spec, base_dir))
    except ToolSetError as exc:
        raise InvalidSpec(f"tools.{_index(spec, exc.module)}", exc.reason) from None
    directory = Directory(session.client, session.keys, member_ttl_s=session.settings.member_ttl_s)
    manifest = directory.manifest(queue, fingerprint)
    what = f"queue {queue!r} with tool set {fingerprint} ({', '.join(spec.tools) or 'no modules'})"
    if manifest is None and not unserved_ok:
        print(
            f"agentledger: no worker has ever served {what}: start one with `agentledger "
            f"workers --queue {queue} --tools {' '.join(spec.tools)}` (from the folder that has "
            "this code), or pass --unserved to publish anyway",
            file=sys.stderr,
        )
        return exit_codes.USAGE
    check_spec(spec, base_dir, manifest=manifest)
    if manifest is not None and not directory.live(queue, fingerprint):
        print(f"agentledger: no worker serves {what} right now; the run waits for one", file=sys.stderr)
    request = request_for(spec, base_dir, session.settings, queue=queue, toolset=fingerprint)
    publish(session.client, session.keys, request)
    print(request.run_id)
    return 0


def follow(session: Session, run_id: str, *, quiet: bool) -> RunState:
    """Print the timeline until the run ends or waits for a human."""
    state: RunState | None = None
    key = session.keys.run(run_id)
    redactors = RunRedactors(session.store)
    while True:
        for env in session.store.read(run_id, after_seq=state.seq if state else 0):
            state = apply(state, env)
            if not quiet:
                print(redactors.text(env, line(env)), flush=True)
                if isinstance(env.data, ApprovalRequested):
                    print(
                        f"      waiting: agentledger approve|deny {run_id} {env.data.call_id}",
                        flush=True,
                    )
        if state is not None and (
            state.status.terminal or state.status is RunStatus.AWAITING_HUMAN
        ):
            return state
        session.client.xread({key: f"0-{state.seq if state else 0}"}, block=1000)


def start_workers(
    session: Session,
    toolset: ToolSet,
    spec: RunSpec,
    base_dir: str | None,
    *,
    queue: str,
    processes: int,
) -> Callable[[], None]:
    """Worker pools for the spec's tool set on `queue`, in this process (processes=0)
    or in child processes."""
    if processes <= 0:
        services = build_services(session.settings, session.client, toolset, queue=queue)
        services.start()
        return services.stop
    args = worker_args(spec.tools, tool_paths(spec, base_dir), queue)
    return spawn_workers(session.settings, args, processes)


def worker_args(modules: Sequence[str], paths: Sequence[str], queue: str) -> list[str]:
    args = ["workers", "--queue", queue]
    if modules:
        args += ["--tools", *modules]
    for path in paths:
        args += ["--tool-path", path]
    return args


def spawn_workers(settings: Settings, args: list[str], processes: int) -> Callable[[], None]:
    env = environ_for_children(settings)
    command = [sys.executable, "-m", "services.entrypoints.cli.main", *args]
    children = [subprocess.Popen(command, env=env) for _ in range(processes)]

    def stop() -> None:
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()

    return stop


def workers(
    session: Session,
    *,
    modules: Sequence[str],
    paths: Sequence[str],
    queue: str,
    processes: int,
    pools: Sequence[Pool] = ALL_POOLS,
) -> int:
    try:
        toolset = load_toolset(modules, paths)
    except ToolSetError as exc:
        print(f"agentledger: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    if processes > 1:
        args = worker_args(modules, paths, queue)
        args += ["--pools", ",".join(str(p) for p in pools)]
        stop = spawn_workers(session.settings, args, processes)
        _wait_for_signal()
        stop()
        return 0
    services: Services = build_services(
        session.settings, session.client, toolset, queue=queue, pools=pools
    )
    services.start()
    print(
        f"agentledger workers up on {session.settings.redis_url} (prefix "
        f"{session.settings.prefix!r}): queue {queue!r}, tool set {toolset.fingerprint} "
        f"({', '.join(toolset.modules) or 'built-in tools only'}), pools "
        f"{', '.join(str(p) for p in pools)}",
        flush=True,
    )
    _wait_for_signal()
    services.stop()
    return 0


def print_toolset(modules: Sequence[str], paths: Sequence[str]) -> int:
    """The fingerprint outside publishers name in a RunRequested's `toolset`."""
    try:
        print(fingerprint_of(modules, paths))
    except ToolSetError as exc:
        print(f"agentledger: {exc}", file=sys.stderr)
        return exit_codes.USAGE
    return 0


def _index(spec: RunSpec, module: str) -> int:
    return spec.tools.index(module) if module in spec.tools else 0


def _wait_for_signal() -> None:
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        time.sleep(0)
