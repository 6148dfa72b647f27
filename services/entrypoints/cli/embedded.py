"""An embedded run: one `agentledger run` published, signed as this state folder's
own publisher (`local-…`), on a private task queue (`run.<hex>`) that only a
`run` process serves — the first one, or `agentledger run --attach RUN` later.
This module owns telling one apart, whether a process serves it now (a live
worker of its queue and tool set), and the exact commands a person types to let
it go on once its `run` has exited: a control to answer it, then the attach."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from agentledger.events.commands import Pool
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.services.adapters.inbox.port import Liveness
from agentledger.services.adapters.publishers.publishers_file import local_name
from agentledger.services.session import Session
from agentledger.services.settings import Settings

PRIVATE_PREFIX = "run."  # an embedded run's task queue: `run.` and 12 hex


def is_private(queue: str) -> bool:
    return queue.startswith(PRIVATE_PREFIX)


def embedded_here(state: RunState, settings: Settings) -> bool:
    """The run is an embedded run of this state folder: on a private queue, published
    as this folder's own publisher (whose streams an attached `run` reads)."""
    return is_private(state.queue) and state.publisher == local_name(settings.state_dir)


def serving(session: Session, state: RunState) -> list[str]:
    """The live workers of the run's task queue and tool set, of any pool."""
    found: list[str] = []
    for pool in Pool:
        found += [w for w in session.admin.live(state.queue, state.toolset, pool) if w not in found]
    return found


def unserved_here(session: Session, state: RunState) -> bool:
    """An embedded run of this state folder, not ended, that no process serves:
    only `agentledger run --attach` lets it go on."""
    if state.status.terminal or not embedded_here(state, session.settings):
        return False
    return not serving(session, state)


def command(*args: str) -> str:
    return shlex.join(["agentledger", *args])


def attach_command(run_id: str) -> str:
    return command("run", "--attach", run_id)


def reply_command(run_id: str, *, as_: str | None = None) -> str:
    """`agentledger reply RUN "…"`: the person writes their guidance in place of the dots."""
    return command("reply", run_id) + ' "…"' + (f" {shlex.join(['--as', as_])}" if as_ else "")


def waiting_for_a_person(run_id: str, go_on: str, *, as_: str | None = None) -> str:
    """What `run` says of its run left `awaiting_human`: how to answer it (signed
    `--as` its publisher, when not this folder's own), then how it goes on."""
    signed = ["--as", as_] if as_ else []
    resume, abort = command("resume", run_id, *signed), command("abort", run_id, *signed)
    return (
        f"the run waits for a person: answer with `{reply_command(run_id, as_=as_)}` (guidance for "
        f"the model; or `{resume}`, or `{abort}` to end it failed), then go on with `{go_on}`"
    )


def at_the_gate(run_id: str, go_on: str, *, as_: str | None = None, replies: bool = False) -> str:
    """What `run` says of a flow waiting at its gate (`human:` stage): approve, deny, or
    reply (when the gate's `on:` routes `replied`)."""
    signed = ["--as", as_] if as_ else []
    approve = command("approve", run_id, *signed)
    deny = command("deny", run_id, *signed) + ' --reason "…"'
    reply = f", or reply with `{reply_command(run_id, as_=as_)}`" if replies else ""
    return (
        f"the flow waits at its gate: approve with `{approve}`, deny with `{deny}`{reply}, "
        f"then go on with `{go_on}`"
    )


def left(run_id: str, status: RunStatus | str, go_on: str) -> str:
    """What `run` says of its run left live when it stopped at once."""
    cancelling = (
        " (it was asked to cancel: it ends cancelled)" if status == RunStatus.CANCELLING else ""
    )
    return f"run {run_id} is left {status}{cancelling}; `{go_on}` goes on with it"


@contextmanager
def intake_while_delivering(session: Session, run_id: str, publisher: str | None) -> Iterator[None]:
    """Around a control of an embedded run of this state folder signed as its own
    publisher, when no intake of that publisher is live (the run's `run` exited):
    the embedded intake, in this process, so the control is taken and its verdict
    known now (nothing is left in the inbox to act later). Loads no tool code."""
    state = session.load(run_id)
    local = local_name(session.settings.state_dir)
    ours = (
        publisher in (None, local) and state is not None and embedded_here(state, session.settings)
    )
    ttl_s = session.settings.member_ttl_s
    if not ours or session.inbox.intake_liveness(ttl_s=ttl_s, publisher=local) is Liveness.LIVE:
        yield
        return
    from agentledger.services.intake_role import build_intake  # only then: the controls need no app

    intake = build_intake(session.settings, session.client, only=local).start()
    try:
        intake.membership.beat()  # live at once, for the control's check
        yield
    finally:
        intake.stop()


def after_control(session: Session, run_id: str) -> str | None:
    """What a person does next after a control recorded on an embedded run of this
    state folder that no process serves: the attach (None: it ended, or it is served)."""
    state = session.load(run_id)
    if state is None or not unserved_here(session, state):
        return None
    return attach_command(run_id)
