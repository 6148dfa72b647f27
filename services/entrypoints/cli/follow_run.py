"""Following a run to its end, as `run` and `run --attach` do (`to_the_end`):
publish its request (none when attaching), print its timeline until it ends or
waits for a person, ask it to cancel on the first SIGINT/SIGTERM, and, when it
stops before its end, say the exact commands that let it go on."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from agentledger.events.flow_step import takes_reply, waiting_run
from agentledger.events.following import Until, reached
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import ApprovalRequested
from agentledger.schemas.inbox import RunCancelRequested, RunRequested
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.adapters.reading.follow import follow as following
from agentledger.services.entrypoints.cli import exit_codes, interrupts
from agentledger.services.entrypoints.cli.embedded import (
    at_the_gate,
    command,
    left,
    reply_command,
    waiting_for_a_person,
)
from agentledger.services.entrypoints.cli.redacted import RunRedactors
from agentledger.services.entrypoints.controls import user_name
from agentledger.services.entrypoints.describe import line
from agentledger.services.entrypoints.reply import emit, say
from agentledger.services.entrypoints.summary import run_summary
from agentledger.services.secrets import redactor_for
from agentledger.services.session import Session

CANCEL_MARGIN_S = 10.0  # beyond the run's cancel grace, for the workers to record the end
FOLLOW_GATHER_S = 0.02  # after printing what came, wait this long for more before the next read
FOLLOW_WAIT_S = 0.25  # a wait for the run's next append before the next look (and the inbox's)


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
        extra = {
            **({"interrupted": True} if interrupted else {}),
            **({"next": steps} if steps else {}),
        }
        emit(redact.value({**run_summary(state), **extra}))
        return
    print(f"\nrun {state.run_id}: {state.status}  {redact.text(state.detail)}")
    if state.status is RunStatus.AWAITING_HUMAN and state.escalated_for == "flow_gate":
        print(
            f"  {at_the_gate(state.run_id, then.go_on, as_=then.as_, replies=takes_reply(state))}"
        )
    elif state.status is RunStatus.AWAITING_HUMAN:
        print(f"  {waiting_for_a_person(waiting_run(state), then.go_on, as_=then.as_)}")


def _next_steps(state: RunState, then: Then) -> list[str]:
    """The commands that let a run go on once this command has exited (none: it ended)."""
    if state.status.terminal:
        return []
    if state.status is RunStatus.AWAITING_HUMAN and state.escalated_for == "flow_gate":
        signed = ["--as", then.as_] if then.as_ else []
        return [command("approve", state.run_id, *signed), then.go_on]
    if state.status is RunStatus.AWAITING_HUMAN:
        return [reply_command(waiting_run(state), as_=then.as_), then.go_on]
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
        return _cancel_and_wait(
            session, run_id, entry_id, state, signer, quiet=quiet, then=then
        ), True


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
        say(
            f"run {run_id} did not end within {grace:g}s (it is {status}); `{then.go_on}` goes on with it"
        )
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
                printed.append(
                    f"      waiting: agentledger approve|deny {run_id} {env.data.call_id}"
                )
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
