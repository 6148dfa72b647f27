"""Commands that start work: run (embedded, follows the run to its end),
submit (publish only) and workers (the pools of one or more processes)."""

from __future__ import annotations

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
from schemas.errors import InvalidSpec
from schemas.inbox import RunCancelRequested, RunRequested
from schemas.spec import RunSpec
from services.adapters.tools.registry import REGISTRY
from services.bootstrap import Services, build_services
from services.clock import new_run_id
from services.entrypoints.cli import exit_codes, interrupts
from services.entrypoints.cli.children import die_with_parent
from services.entrypoints.cli.control_cmds import user_name
from services.entrypoints.cli.describe import line
from services.entrypoints.cli.inbox_watch import Liveness, intake_liveness, rejected_reason
from services.entrypoints.cli.inspect_cmds import run_summary
from services.entrypoints.cli.redacted import RunRedactors
from services.entrypoints.cli.reply import emit, say
from services.entrypoints.cli.session import Session
from services.entrypoints.cli.spec_file import load_spec_file, with_lines
from services.handlers.spec_check import check_spec
from services.handlers.steps import load
from services.loops.intake import publish
from services.secrets import redactor_for
from services.settings import Settings, environ_for_children, masked

CANCEL_MARGIN_S = 10.0  # beyond the run's cancel grace, for the workers to record the end


def prepare(spec_path: str) -> tuple[RunSpec, str]:
    """Load and check the spec file before any Redis is touched: InvalidSpec with
    every problem, each with its line."""
    spec, base_dir, lines = load_spec_file(spec_path)
    try:
        check_spec(spec, base_dir, REGISTRY)
    except InvalidSpec as exc:
        raise InvalidSpec.of(with_lines(list(exc.problems), lines), source=spec_path) from None
    return spec, base_dir


def request_for(spec: RunSpec, base_dir: str | None, settings: Settings) -> RunRequested:
    """A request for a new run of `spec` (checked; its workspace copied if it asks)."""
    run_id = new_run_id()
    check_spec(spec, base_dir, REGISTRY)
    if spec.workspace and base_dir is None and not Path(spec.workspace).is_absolute():
        raise InvalidSpec("workspace", f"{spec.workspace!r} is relative, and there is no spec folder")
    workspace = str(Path(base_dir or "/", spec.workspace).resolve()) if spec.workspace else None
    if workspace and spec.copy_workspace:
        copy = Path(settings.state_dir, "workspaces", run_id).resolve()
        # copy links as links: following them would put files from outside the
        # workspace inside the copy (and loop forever on a link to an ancestor)
        shutil.copytree(workspace, copy, symlinks=True)
        workspace = str(copy)
    return RunRequested(
        run_id=run_id, request_id=run_id, spec=spec, base_dir=base_dir, workspace=workspace
    )


def submit(session: Session, request: RunRequested, *, as_json: bool) -> int:
    now_ms = int(time.time() * 1000)
    if intake_liveness(session.client, session.keys, now_ms=now_ms) is Liveness.NONE:
        say(
            f"no intake reads the inbox on {session.located.url} (prefix "
            f"{session.settings.prefix!r}) yet: the run waits until `agentledger workers` start there"
        )
    entry_id = publish(session.client, session.keys, request)
    if as_json:
        emit({"run_id": request.run_id, "entry_id": entry_id})
    else:
        print(request.run_id)
    return 0


def run(session: Session, request: RunRequested, *, as_json: bool, processes: int) -> int:
    """Run on embedded workers and follow. The first SIGINT/SIGTERM asks the run to
    cancel and waits for it to end (within its cancel grace); a second stops at once.
    Either way the workers stop gracefully, and the exit code is 130."""
    run_id = request.run_id
    assert run_id is not None
    stop_workers = start_workers(session, processes)
    try:
        state, interrupted = _publish_and_follow(session, request, quiet=as_json)
    except interrupts.Interrupted:  # the second signal: stop following at once
        state, interrupted = load(session.store, run_id), True
        left = state.status if state else "not created"
        say(f"stopped at once: run {run_id} is left {left}; workers on this Redis take it on")
    finally:
        with interrupts.shielded("stopping the workers (they finish what they hold)"):
            stop_workers()
    if state is None:  # refused by the intake, or interrupted before it took the request
        return exit_codes.INTERRUPTED if interrupted else exit_codes.USAGE
    redact = redactor_for(state.spec)
    if as_json:
        emit(redact.value({**run_summary(state), **({"interrupted": True} if interrupted else {})}))
    else:
        print(f"\nrun {run_id}: {state.status}  {redact.text(state.detail)}")
        if state.status is RunStatus.AWAITING_HUMAN:
            print(f"  the run waits for a human; see `agentledger status {run_id}`")
    return exit_codes.INTERRUPTED if interrupted else exit_codes.for_status(state.status)


def _publish_and_follow(
    session: Session, request: RunRequested, *, quiet: bool
) -> tuple[RunState | None, bool]:
    """The run's state when following ends, and whether a signal ended it."""
    run_id = request.run_id
    assert run_id is not None
    entry_id = publish(session.client, session.keys, request)
    with interrupts.graceful() as asked:
        state = follow(session, run_id, entry_id, quiet=quiet, until=asked)
        if not asked.is_set() or _settled(state):
            return state, False
        return _cancel_and_wait(session, run_id, entry_id, state, quiet=quiet), True


def _settled(state: RunState | None) -> bool:
    return state is not None and (state.status.terminal or state.status is RunStatus.AWAITING_HUMAN)


def _cancel_and_wait(
    session: Session, run_id: str, entry_id: str, state: RunState | None, *, quiet: bool
) -> RunState | None:
    """Ask the run to cancel (through the inbox, after its request) and follow it
    until it ends or its cancel grace (plus a margin) is over."""
    grace = (state.spec.policies.cancel_grace_s if state else 5.0) + CANCEL_MARGIN_S
    say(f"interrupted: cancelling run {run_id} (up to {grace:g}s); interrupt again to stop now")
    reason = "the agentledger run command was interrupted"
    publish(session.client, session.keys, RunCancelRequested(run_id=run_id, by=user_name(), reason=reason))
    deadline = threading.Event()
    timer = threading.Timer(grace, deadline.set)
    timer.start()
    try:
        final = follow(session, run_id, entry_id, quiet=quiet, until=deadline, state=state)
    finally:
        timer.cancel()
    if not _settled(final):
        status = final.status if final else "not created"
        say(f"run {run_id} did not end within {grace:g}s (it is {status}); workers on this Redis finish it")
    return final


def follow(
    session: Session,
    run_id: str,
    entry_id: str,
    *,
    quiet: bool,
    until: threading.Event,
    state: RunState | None = None,
) -> RunState | None:
    """Print the timeline until the run ends or waits for a human, or `until` is
    set; None when the intake refused the request (the reason is said)."""
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
        if _settled(state) or until.is_set():
            return state
        if state is None and (reason := rejected_reason(session.client, session.keys, entry_id)):
            say(f"refused: {reason}")
            return None
        session.client.xread({key: f"0-{state.seq if state else 0}"}, block=250)


def start_workers(session: Session, processes: int):  # type: ignore[no-untyped-def]
    """Worker pools in this process (processes=0) or in child processes."""
    if processes <= 0:
        services = build_services(session.settings, session.client)
        services.start()
        return services.stop
    env = environ_for_children(session.settings)
    # a session of their own: Ctrl-C in a terminal reaches only us, and we stop them
    # in order; they die with us if we are killed; their notes go to our stderr
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "services.entrypoints.cli.main", "workers"],
            env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr,
            start_new_session=True, preexec_fn=die_with_parent,
        )  # fmt: skip
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
        f"agentledger workers up on {masked(session.settings.redis_url or '')} (prefix {session.settings.prefix!r})",
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
