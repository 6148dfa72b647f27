"""Commands that start work: run (embedded: a private task queue served by workers
in this process or its children, and an intake in this process that reads only
its own publisher's streams; follows the run to its end — `to_the_end`, which
`run --attach` shares (`attach_cmds`) — and, when it stops before the end, says
the exact commands that let the run go on), submit (publish to a shared task
queue) and toolset (the fingerprint a publisher names). With `--processes N` the
run's workers are child `agentledger workers` (`workers_cmds`)."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from events.following import Until, reached
from events.mcp_policy import is_mcp_ask, modules_of
from events.state import RunState
from events.status import RunStatus
from events.types import DEFAULT_QUEUE, ApprovalRequested
from schemas.errors import InvalidSpec, SpecProblem
from schemas.inbox import RunCancelRequested, RunRequested
from schemas.spec import RunSpec
from services.adapters.inbox.port import Liveness
from services.adapters.models.preflight import check_provider
from services.adapters.publishers.publishers_file import Signer, local_name
from services.adapters.reading.follow import follow as following
from services.adapters.tools.toolset import (
    ToolSet,
    ToolSetError,
    computing_imports,
    fingerprint_of,
    load_toolset,
    static_code,
)
from services.bounded_yaml import Limits
from services.clock import new_run_id
from services.entrypoints.cli import exit_codes, interrupts
from services.entrypoints.cli.children import die_with_parent
from services.entrypoints.cli.embedded import (
    PRIVATE_PREFIX,
    attach_command,
    command,
    is_private,
    left,
    reply_command,
    waiting_for_a_person,
)
from services.entrypoints.cli.publisher_cmds import check_grant, local_signer
from services.entrypoints.cli.redacted import RunRedactors
from services.entrypoints.cli.spec_file import SpecLines, load_spec_file, source_name, with_lines
from services.entrypoints.cli.supervise import stop_children
from services.entrypoints.controls import signer_for, user_name
from services.entrypoints.describe import line
from services.entrypoints.reply import emit, fail, say
from services.entrypoints.summary import run_summary
from services.errors import ProviderUnready
from services.handlers.spec_check import spec_problems, tool_paths
from services.loops.inbox_parse import Rejected, check_size
from services.secrets import redactor_for
from services.session import Session
from services.settings import Settings, environ_for_children, masked
from services.structured_logs import child_args

CANCEL_MARGIN_S = 10.0  # beyond the run's cancel grace, for the workers to record the end
FOLLOW_GATHER_S = 0.02  # after printing what came, wait this long for more before the next read
FOLLOW_WAIT_S = 0.25  # a wait for the run's next append before the next look (and the inbox's)


@dataclass(frozen=True)
class Prepared:
    """A spec file read and checked, before any Redis is touched."""

    spec: RunSpec
    base_dir: str
    lines: SpecLines
    source: str
    toolset: ToolSet | None  # `run` loads the spec's tool modules; `submit` does not
    fingerprint: str
    base: ToolSet | None = None  # the modules' tool set, without the MCP servers
    hub: Any = None  # the MCP servers `run` started (an McpHub), or None
    mcp: str | None = None  # the servers file

    def refuse(self, problems: list[SpecProblem]) -> InvalidSpec:
        return InvalidSpec.of(with_lines(problems, self.lines), source=self.source)


def prepare(
    spec_path: str, command: str, *, mcp: str | None = None, settings: Settings | None = None
) -> Prepared:
    """Load and check the spec file: InvalidSpec with every problem, each with its line.
    `run` imports the spec's tool modules (they run here); `submit` only hashes them.
    `run` also checks that its model can be reached from here (ProviderUnready: no
    key, or its API does not take a connection) before anything is recorded.
    With `mcp`, the servers file's servers are started: their tools and versions
    are part of the tool set (`submit` stops them again once it knows the fingerprint)."""
    limits = Limits(max_bytes=(settings or Settings()).inbox_max_bytes)  # a spec goes in a message
    spec, base_dir, lines = load_spec_file(spec_path, limits)
    paths = tool_paths(spec, base_dir)
    modules = modules_of(spec.tools)
    problems: list[SpecProblem] = []
    toolset, fingerprint, base, hub = None, "", None, None
    try:
        if command == "run" or mcp:
            base = toolset = load_toolset(modules, paths)
            fingerprint = toolset.fingerprint
        else:
            fingerprint = fingerprint_of(modules, paths)
    except ToolSetError as exc:
        index = spec.tools.index(exc.module) if exc.module in spec.tools else 0
        problems.append(SpecProblem(f"tools.{index}", exc.reason))
    if mcp and base is not None:
        from services.entrypoints.cli.mcp_servers import start_hub

        hub = start_hub(mcp, settings or Settings())
        toolset = hub.toolset(base)
        fingerprint = toolset.fingerprint
    problems += mcp_ask_problems(spec, hub)
    # `run` is the deployment: its maxima are known here (`submit`'s are the intake's to check)
    maxima = (settings or Settings()) if command == "run" else None
    problems += spec_problems(spec, base_dir, toolset=toolset, settings=maxima)
    if command != "run" and hub is not None:
        hub.close()
        hub, toolset = None, None
    prepared = Prepared(
        spec, base_dir, lines, source_name(spec_path), toolset, fingerprint, base, hub, mcp
    )
    try:
        if problems:
            raise prepared.refuse(problems)
        if command == "run":  # its workers are this process's: their model must answer them
            check_provider(spec.model, settings or Settings())
    except (InvalidSpec, ProviderUnready):
        if hub is not None:
            hub.close()
        raise
    return prepared


def mcp_ask_problems(spec: RunSpec, hub: Any) -> list[SpecProblem]:
    if not any(is_mcp_ask(e) for e in spec.tools):
        return []
    from services.entrypoints.cli.mcp_servers import ask_problems

    return ask_problems(spec, hub)


def private_queue() -> str:
    """The task queue of one embedded `run`: nobody else's workers serve it."""
    return f"{PRIVATE_PREFIX}{uuid.uuid4().hex[:12]}"


def toolset_of(spec: RunSpec, base_dir: str | None) -> ToolSet:
    try:
        return load_toolset(modules_of(spec.tools), tool_paths(spec, base_dir))
    except ToolSetError as exc:
        index = spec.tools.index(exc.module) if exc.module in spec.tools else 0
        raise InvalidSpec(f"tools.{index}", exc.reason) from None


def request_for(
    spec: RunSpec, base_dir: str | None, settings: Settings, *, queue: str, toolset: str
) -> RunRequested:
    """A request for a new run of `spec`. Its workspace is the spec's, from
    `base_dir`: the intake decides whether the run may have it, and copies it."""
    run_id = new_run_id(uuid.uuid4().int % settings.shards)
    if spec.workspace and base_dir is None and not Path(spec.workspace).is_absolute():
        raise InvalidSpec("workspace", f"{spec.workspace!r} is relative, and there is no spec folder")
    request = RunRequested(
        run_id=run_id, request_id=run_id, spec=spec, base_dir=base_dir, queue=queue, toolset=toolset,
    )  # fmt: skip
    try:
        check_size(request.model_dump_json().encode(), settings.inbox_max_bytes)
    except Rejected as exc:
        raise InvalidSpec("", f"{exc.reason} (AGENTLEDGER_INBOX_MAX_BYTES)") from None
    return request


def submit(
    session: Session,
    prepared: Prepared,
    *,
    queue: str | None,
    unserved_ok: bool,
    as_json: bool,
    as_: str | None = None,
) -> int:
    spec, fingerprint = prepared.spec, prepared.fingerprint
    queue = queue or spec.queue or DEFAULT_QUEUE
    if as_ is None:
        message = (
            "submit signs the request as a publisher: pass --as NAME (`agentledger publishers "
            "add NAME --principal ID@TENANT --scopes A,B` files one and prints its key)"
        )
        return fail(exit_codes.USAGE, "no publisher", message, as_json)
    signer = signer_for(session.settings, as_)
    check_grant(session.settings, signer, spec.principal, queue)
    manifest = session.admin.manifest(queue, fingerprint)
    what = f"queue {queue!r} with tool set {fingerprint} ({', '.join(spec.tools) or 'no modules'})"
    if manifest is None and not unserved_ok:
        message = (
            f"no worker has ever served {what}: start one with `agentledger workers --queue "
            f"{queue} --tools {' '.join(spec.tools)}` (from the folder that has this code), or "
            "pass --unserved to publish anyway"
        )
        return fail(exit_codes.USAGE, "unserved", message, as_json)
    if manifest is not None and (problems := spec_problems(spec, prepared.base_dir, manifest=manifest)):
        raise prepared.refuse(problems)
    if manifest is None:  # published with --unserved
        say(
            f"no worker has served {what} yet, so the tools the spec's scripted calls name "
            "are not checked: the intake refuses the run if its tool set lacks one, and "
            "`agentledger status RUN` then says why"
        )
    if manifest is not None and not session.admin.live(queue, fingerprint):
        say(f"no worker serves {what} right now; the run waits for one")
    ttl_s = session.settings.member_ttl_s
    if session.inbox.intake_liveness(ttl_s=ttl_s, publisher=signer.name) is Liveness.NONE:
        say(
            f"no intake reads the inbox on {masked(session.located.url)} (prefix "
            f"{session.settings.prefix!r}) yet: the run waits until `agentledger intake` (or "
            "`agentledger workers --pools intake`) starts there"
        )
    request = request_for(spec, prepared.base_dir, session.settings, queue=queue, toolset=fingerprint)
    entry_id = session.inbox.publish(request, signer=signer)
    if as_json:
        emit({"run_id": request.run_id, "entry_id": entry_id, "queue": queue, "toolset": fingerprint})
    else:
        print(request.run_id)
    return 0


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


@dataclass(frozen=True)
class Then:
    """How a person lets the run go on once this command has exited: `go_on` serves
    it (the attach, or the workers of its shared queue); `as_` signs their controls."""

    go_on: str
    as_: str | None = None


def to_the_end(
    session: Session,
    run_id: str,
    signer: Signer,
    stop_workers: Callable[[], None],
    *,
    request: RunRequested | None,
    as_json: bool,
    then: Then,
) -> int:
    """Publish the run's request (none: attaching to a run that exists) and follow the
    run to its end, or until it waits for a person. The first SIGINT/SIGTERM asks the
    run to cancel and waits for it to end (within its cancel grace); a second stops
    at once. Either way the workers stop gracefully, and the exit code is 130."""
    entry_id: str | None = None
    at_once = False
    try:
        if request is not None:
            entry_id = session.inbox.publish(request, signer=signer)
        state, interrupted = _follow_or_cancel(
            session, run_id, entry_id, signer, quiet=as_json, then=then
        )
    except interrupts.Interrupted:  # the second signal: stop following at once
        state, interrupted, at_once = None, True, True
    finally:
        with interrupts.shielded("stopping the workers (they finish what they hold)"):
            stop_workers()
    if at_once:  # said once the workers stopped: what they finished meanwhile is counted
        state = _stopped_at_once(session, run_id, entry_id, then)
    if state is None:  # refused by the intake, or interrupted before it took the request
        return exit_codes.INTERRUPTED if interrupted else exit_codes.USAGE
    _summary(state, interrupted, as_json=as_json, then=then)
    return exit_codes.INTERRUPTED if interrupted else exit_codes.for_status(state.status)


def _summary(state: RunState, interrupted: bool, *, as_json: bool, then: Then) -> None:
    redact = redactor_for(state.spec)
    steps = _next_steps(state, then)
    if as_json:
        extra = {**({"interrupted": True} if interrupted else {}), **({"next": steps} if steps else {})}
        emit(redact.value({**run_summary(state), **extra}))
        return
    print(f"\nrun {state.run_id}: {state.status}  {redact.text(state.detail)}")
    if state.status is RunStatus.AWAITING_HUMAN:
        print(f"  {waiting_for_a_person(state.run_id, then.go_on, as_=then.as_)}")


def _next_steps(state: RunState, then: Then) -> list[str]:
    """The commands that let a run go on once this command has exited (none: it ended)."""
    if state.status.terminal:
        return []
    if state.status is RunStatus.AWAITING_HUMAN:
        return [reply_command(state.run_id, as_=then.as_), then.go_on]
    return [then.go_on]


def _stopped_at_once(
    session: Session, run_id: str, entry_id: str | None, then: Then
) -> RunState | None:
    """After a second signal, with the workers stopped: what the run was left in, said.
    A request no intake took yet is withdrawn (it would create a run nobody follows)."""
    state = session.load(run_id)
    if state is None and entry_id is not None:
        if session.inbox.withdraw(entry_id):
            say(f"stopped at once: the request for run {run_id} was withdrawn; no run was created")
            return None
        state = session.load(run_id)  # taken meanwhile
    if state is None:
        reason = session.inbox.rejected_reason(entry_id) if entry_id else None
        say(f"stopped at once: run {run_id} was not created" + (f": {reason}" if reason else ""))
    elif state.status.terminal:
        say(f"stopped at once: run {run_id} ended {state.status} meanwhile")
    elif state.status is RunStatus.AWAITING_HUMAN:
        say(f"stopped at once: run {run_id} waits for a person")
    else:
        say(f"stopped at once: {left(run_id, state.status, then.go_on)}")
    return state


def _follow_or_cancel(
    session: Session, run_id: str, entry_id: str | None, signer: Signer, *, quiet: bool, then: Then
) -> tuple[RunState | None, bool]:
    """The run's state when following ends, and whether a signal ended it."""
    with interrupts.graceful() as asked:
        state = follow(session, run_id, entry_id, quiet=quiet, until=asked)
        if not asked.is_set() or _settled(state):
            return state, False
        return _cancel_and_wait(session, run_id, entry_id, state, signer, quiet=quiet, then=then), True


def _settled(state: RunState | None) -> bool:
    return reached(Until.SETTLED, state)


def _cancel_and_wait(
    session: Session,
    run_id: str,
    entry_id: str | None,
    state: RunState | None,
    signer: Signer,
    *,
    quiet: bool,
    then: Then,
) -> RunState | None:
    """Ask the run to cancel (through the inbox, after its request) and follow it
    until it ends or its cancel grace (plus a margin) is over."""
    grace = (state.spec.policies.cancel_grace_s if state else 5.0) + CANCEL_MARGIN_S
    say(f"interrupted: cancelling run {run_id} (up to {grace:g}s); interrupt again to stop now")
    reason = "the agentledger run command was interrupted"
    cancel = RunCancelRequested(run_id=run_id, by=user_name(), reason=reason)
    session.inbox.publish(cancel, signer=signer)
    deadline = threading.Event()
    timer = threading.Timer(grace, deadline.set)
    timer.start()
    try:
        final = follow(session, run_id, entry_id, quiet=quiet, until=deadline, state=state)
    finally:
        timer.cancel()
    if not _settled(final):
        status = final.status if final else "not created"
        say(f"run {run_id} did not end within {grace:g}s (it is {status}); `{then.go_on}` goes on with it")
    return final


def follow(
    session: Session,
    run_id: str,
    entry_id: str | None,
    *,
    quiet: bool,
    until: threading.Event,
    state: RunState | None = None,
) -> RunState | None:
    """Print the timeline until the run ends or waits for a human, or `until` is
    set; None when the intake refused the request (the reason is said)."""
    redactors = RunRedactors(session.store)
    steps = following(
        session.reader, run_id, after=state, until=Until.SETTLED, stop=until,
        wait_s=FOLLOW_WAIT_S, gather_s=FOLLOW_GATHER_S,
    )  # fmt: skip
    for step in steps:
        state = step.state
        printed = []
        for env in step.events if not quiet else []:
            printed.append(redactors.text(env, line(env)))
            if isinstance(env.data, ApprovalRequested):
                printed.append(f"      waiting: agentledger approve|deny {run_id} {env.data.call_id}")
        if printed:
            print("\n".join(printed), flush=True)
        if step.last:
            break
        if state is None:
            if entry_id is None:  # attached to a run that does not exist
                return None
            if reason := session.inbox.rejected_reason(entry_id):
                say(f"refused: {reason}")
                return None
    return state


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
    from services.intake_role import build_intake  # dramatiq: `submit` needs none of it

    intake = build_intake(session.settings, session.client, only=publisher).start()
    hub = prepared.hub if prepared is not None else None
    if processes <= 0:
        from services.bootstrap import build_services

        services = build_services(session.settings, session.client, toolset, queue=queue)
        services.start()
        if hub is not None and prepared is not None and prepared.base is not None:
            from services.entrypoints.cli.mcp_servers import follow_servers

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
    command = [sys.executable, "-m", "services.entrypoints.cli.main", *child_args(), *args]
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


def print_toolset(
    modules: Sequence[str], paths: Sequence[str], *, load: bool = False, as_json: bool
) -> int:
    """The fingerprint outside publishers name in a RunRequested's `toolset`: from
    the source files (no import), or with `load` as a worker computes it."""
    try:
        if load:
            loaded = load_toolset(modules, paths)
            fingerprint, hashed, dynamic = loaded.fingerprint, list(loaded.hashed), list(loaded.dynamic)
        else:
            fingerprint, hashed, dynamic = fingerprint_of(modules, paths), sorted(static_code(modules, paths)), []
        computing = [] if load else list(computing_imports(modules, paths))
    except ToolSetError as exc:
        return fail(exit_codes.USAGE, "bad tool set", str(exc), as_json)
    if as_json:
        emit({"toolset": fingerprint, "modules": sorted(set(modules)), "hashed": hashed,
              "loaded": load, "dynamic": dynamic, "computing_imports": computing})  # fmt: skip
    else:
        print(fingerprint)
        if computing:
            print(f"agentledger: {', '.join(computing)} import modules by computed names, which a worker's "
                  "fingerprint counts and this one cannot: `agentledger toolset --load …` prints the "
                  "workers' (it imports the modules)", file=sys.stderr)  # fmt: skip
        if dynamic:
            print(f"agentledger: importing the modules loaded {', '.join(dynamic)}, which their source "
                  "does not name: this is the workers' fingerprint; without --load it is another",
                  file=sys.stderr)  # fmt: skip
    return 0
