"""Commands that start work: run (embedded, follows the run to its end),
submit (publish only) and workers (the pools of one or more processes)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from events.fold import apply
from events.state import RunState
from events.status import RunStatus
from events.types import ApprovalRequested
from schemas.inbox import RunRequested
from schemas.spec import RunSpec
from services.adapters.tools.registry import REGISTRY
from services.bootstrap import Services, build_services
from services.clock import new_run_id
from services.entrypoints.cli import exit_codes
from services.entrypoints.cli.describe import line
from services.entrypoints.cli.inspect_cmds import run_summary
from services.entrypoints.cli.redacted import RunRedactors
from services.entrypoints.cli.session import Session
from services.entrypoints.cli.spec_file import load_spec_file
from services.handlers.spec_check import check_spec
from services.loops.intake import publish
from services.secrets import redactor_for
from services.settings import Settings, environ_for_children


def prepare(spec_path: str, settings: Settings) -> RunRequested:
    """Load and check the spec (InvalidSpec on any problem) and build the request,
    before any Redis is touched."""
    spec, base_dir = load_spec_file(spec_path)
    return request_for(spec, base_dir, settings)


def request_for(spec: RunSpec, base_dir: str | None, settings: Settings) -> RunRequested:
    """A request for a new run of `spec` (checked; its workspace copied if it asks)."""
    run_id = new_run_id()
    check_spec(spec, base_dir, REGISTRY)
    workspace = str(Path(base_dir, spec.workspace).resolve()) if spec.workspace else None
    if workspace and spec.copy_workspace:
        copy = Path(settings.state_dir, "workspaces", run_id).resolve()
        # copy links as links: following them would put files from outside the
        # workspace inside the copy (and loop forever on a link to an ancestor)
        shutil.copytree(workspace, copy, symlinks=True)
        workspace = str(copy)
    return RunRequested(
        run_id=run_id, request_id=run_id, spec=spec, base_dir=base_dir, workspace=workspace
    )


def submit(session: Session, request: RunRequested) -> int:
    publish(session.client, session.keys, request)
    print(request.run_id)
    return 0


def run(session: Session, request: RunRequested, *, as_json: bool, processes: int) -> int:
    run_id = request.run_id
    assert run_id is not None
    stop_workers = start_workers(session, processes)
    try:
        publish(session.client, session.keys, request)
        state = follow(session, run_id, quiet=as_json)
    finally:
        stop_workers()
    redact = redactor_for(state.spec)
    if as_json:
        print(json.dumps(redact.value(run_summary(state))))
    else:
        print(f"\nrun {run_id}: {state.status}  {redact.text(state.detail)}")
        if state.status is RunStatus.AWAITING_HUMAN:
            print(f"  the run waits for a human; see `agentledger status {run_id}`")
    return exit_codes.for_status(state.status)


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


def start_workers(session: Session, processes: int):  # type: ignore[no-untyped-def]
    """Worker pools in this process (processes=0) or in child processes."""
    if processes <= 0:
        services = build_services(session.settings, session.client)
        services.start()
        return services.stop
    env = environ_for_children(session.settings)
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "services.entrypoints.cli.main", "workers"], env=env
        )
        for _ in range(processes)
    ]

    def stop() -> None:
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()

    return stop


def workers(session: Session, *, processes: int, queues: list[str] | None) -> int:
    if processes > 1:
        stop = start_workers(session, processes)
        _wait_for_signal()
        stop()
        return 0
    services: Services = build_services(session.settings, session.client)
    services.start(queues=set(queues) if queues else None)
    print(
        f"agentledger workers up on {session.settings.redis_url} (prefix {session.settings.prefix!r})",
        flush=True,
    )
    _wait_for_signal()
    services.stop()
    return 0


def _wait_for_signal() -> None:
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        time.sleep(0)
