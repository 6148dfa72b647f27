"""`agentledger run --attach RUN`: go on with an embedded run whose `run` process
has exited (it waited for a person, was stopped at once, or its terminal closed).
This process serves the run's private task queue with the tool set its
`RunCreated` records (the spec's modules and tool paths, resolved against its
`base_dir`; the MCP servers of `--mcp`), runs the intake of this state folder's
own publisher (so controls are taken) and follows the run to its end exactly as
`run` does: the same timeline, exit codes and Ctrl-C behaviour.

Refused before anything starts, in one line each: an id that is no run (2), a
run that already ended (the exit code of how it ended, as `status` gives it), a
run that is not an embedded run of this state folder (2), one a live process
serves (`exit_codes.SERVED`), and one whose tool code is not the code it started
with (2: both fingerprints named)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from agentledger.events.mcp_policy import modules_of
from agentledger.events.state import RunState
from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.adapters.tools.toolset import ToolSetError, load_toolset
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.embedded import (
    attach_command,
    command,
    is_private,
    serving,
)
from agentledger.services.entrypoints.cli.follow_run import Then, to_the_end
from agentledger.services.entrypoints.cli.prepare import Prepared
from agentledger.services.entrypoints.cli.publisher_cmds import local_signer
from agentledger.services.entrypoints.cli.run_cmds import start_workers, worker_args
from agentledger.services.entrypoints.cli.spec_file import SpecLines
from agentledger.services.entrypoints.reply import fail, say
from agentledger.services.handlers.spec_check import tool_paths
from agentledger.services.secrets import redactor_for
from agentledger.services.session import Session

TAKE_S = 5.0  # how long the attached intake may take to read what waited in the inbox


@dataclass(frozen=True, slots=True)
class Refusal:
    code: int
    kind: str
    message: str


def attach(
    session: Session, run_id: str, *, as_json: bool, processes: int, mcp: str | None = None
) -> int:
    state = session.load(run_id)
    if (refused := refusal(session, run_id, state)) is not None:
        status = {"status": str(state.status)} if state is not None else {}
        return fail(refused.code, refused.kind, refused.message, as_json, run_id=run_id, **status)
    assert state is not None
    try:
        prepared = _tool_set(session, state, mcp)
    except ToolSetError as exc:
        message = f"run {run_id!r}'s tool modules do not load: {exc}; nothing was started"
        return fail(exit_codes.USAGE, "bad tool set", message, as_json, run_id=run_id)
    if (changed := _changed(state, prepared)) is not None:
        if prepared.hub is not None:
            prepared.hub.close()
        return fail(exit_codes.USAGE, "tool set changed", changed, as_json, run_id=run_id)
    signer = local_signer(session)
    assert prepared.toolset is not None
    stop_workers = start_workers(
        session, prepared.toolset, state.spec, state.base_dir, queue=state.queue,
        processes=processes, publisher=signer.name, prepared=prepared,
    )  # fmt: skip
    say(f"attached to run {run_id} ({state.status}): serving queue {state.queue!r} "
        f"with tool set {state.toolset}")  # fmt: skip
    _let_the_intake_read(session, signer.name)
    then = Then(attach_command(run_id))
    return to_the_end(
        session, run_id, signer, stop_workers, request=None, as_json=as_json, then=then
    )


def refusal(session: Session, run_id: str, state: RunState | None) -> Refusal | None:
    """Why this process may not attach to the run (None: it may)."""
    if state is None:
        return Refusal(exit_codes.USAGE, "no run", f"no run {run_id!r}; nothing was started")
    if state.status.terminal:
        detail = redactor_for(state.spec).text(state.detail)
        return Refusal(
            exit_codes.for_status(state.status), "ended",
            f"run {run_id!r} already ended {state.status}" + (f" ({detail})" if detail else "")
            + f"; nothing was started (`{command('status', run_id)}` shows it)",
        )  # fmt: skip
    if (not_here := _not_embedded_here(session, run_id, state)) is not None:
        return Refusal(exit_codes.USAGE, "not an embedded run", not_here)
    if workers := serving(session, state):
        return Refusal(
            exit_codes.SERVED, "served",
            f"run {run_id!r} is served by a live process (worker {', '.join(workers)}): "
            f"`{command('tail', '--run', run_id, '--follow')}` follows it; attach once that "
            f"process has exited (one that died stops counting after {session.settings.member_ttl_s:g}s)",
        )  # fmt: skip
    return None


def _not_embedded_here(session: Session, run_id: str, state: RunState) -> str | None:
    if not is_private(state.queue):
        paths = tool_paths(state.spec, state.base_dir)
        workers = command(*worker_args(modules_of(state.spec.tools), paths, state.queue))
        return (
            f"run {run_id!r} is on the shared task queue {state.queue!r}, not an embedded run's "
            f"private one: the workers of that queue serve it (`{workers}`)"
        )
    local = local_name(session.settings.state_dir)
    if state.publisher != local:
        return (
            f"run {run_id!r} was published as {state.publisher!r}, not as this state folder's "
            f"own publisher {local!r}: attach it with the state folder (AGENTLEDGER_STATE_DIR) "
            "of the `agentledger run` that started it"
        )
    return None


def _tool_set(session: Session, state: RunState, mcp: str | None) -> Prepared:
    """The run's tool set as `run` loaded it: the modules and tool paths its spec
    names, from the folder its RunCreated records; with `mcp`, the servers too."""
    base = load_toolset(modules_of(state.spec.tools), tool_paths(state.spec, state.base_dir))
    toolset, hub = base, None
    if mcp:
        from agentledger.services.entrypoints.cli.mcp_servers import start_hub

        hub = start_hub(mcp, session.settings)
        toolset = hub.toolset(base)
    return Prepared(
        state.spec, state.base_dir or "", SpecLines(None), state.run_id, toolset,
        toolset.fingerprint, base, hub, mcp,
    )  # fmt: skip


def _changed(state: RunState, prepared: Prepared) -> str | None:
    """Why the loaded tool set may not serve the run: its code is not the code the
    run started with (its commands are for that code's workers only)."""
    if prepared.fingerprint == state.toolset:
        return None
    modules = ", ".join(state.spec.tools) or "the built-in tools"
    where = state.base_dir or "the current folder"
    mcp = "" if prepared.mcp else "; a run started with --mcp FILE needs the same --mcp FILE"
    return (
        f"run {state.run_id!r} started with tool set {state.toolset}, and its tool code "
        f"({modules}, from {where}) is now tool set {prepared.fingerprint}: put the code back "
        f"as it was when the run started, or start the run again (`agentledger run SPEC`){mcp}"
    )


def _let_the_intake_read(session: Session, publisher: str) -> None:
    """Wait (a little) until the intake has read what waited in the publisher's inbox
    streams, so a control sent while nothing served the run acts before we follow."""
    waiting = session.inbox.newest(publisher)
    deadline = time.monotonic() + TAKE_S
    while waiting and time.monotonic() < deadline:
        waiting = [entry for entry in waiting if session.inbox.waiting(entry)]
        if waiting:
            time.sleep(0.05)
