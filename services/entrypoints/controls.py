"""The controls — cancel, approve, deny, reply, resume, abort — as the CLI and the
web view both send them: each is published to the inbox (as one publisher among
others) and the intake's verdict awaited. Nothing is published for a run that
does not exist, whose principal the signer is not granted, that already ended,
or whose state the control does not fit (the intake's own rules, asked first,
in its order: it would refuse it), nor when no intake reads the inbox; a
message no intake took within TAKE_S is withdrawn, so it never acts later,
when nobody expects it.
A reply, resume or abort names the escalation it answers: the run's current
one when the command reads it (`current_escalation`). What a verdict means to a
person is each entrypoint's to say: an exit code (`cli.control_cmds`), an HTTP
status (`web.app`)."""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from agentledger.events.errors import ControlRefused
from agentledger.events.grants import control_refusal
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import RunEscalated
from agentledger.schemas import inbox
from agentledger.schemas.envelope import Envelope
from agentledger.services.adapters.inbox.port import Liveness
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.publishers.publishers_file import Signer
from agentledger.services.entrypoints.reply import shown
from agentledger.services.errors import BadOption, ConfigError
from agentledger.services.loops.intake import decide_control
from agentledger.services.redis_urls import masked
from agentledger.services.session import Session
from agentledger.services.settings import Settings

TAKE_S = 3.0  # an intake blocks at most 0.5 s between reads of the inbox
WAIT_S = 10.0  # for its verdict, once it took the message


class Outcome(StrEnum):
    """What became of a control (the value: the kind a failure is reported as)."""

    APPENDED = "appended"  # the intake appended it: the events are in the verdict
    NO_RUN = "no run"
    REFUSED = "refused"  # by our reading of the intake's rules first, or by the intake
    ALREADY_ENDED = "already ended"
    NO_INTAKE = "no workers"  # no intake reads the inbox (nothing was sent, or it was withdrawn)
    NO_VERDICT = "no verdict"  # an intake took it and recorded nothing in time


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of a control: APPENDED and the events the intake appended, or
    the failure and its reason (nothing was appended)."""

    outcome: Outcome
    message: str = ""
    entry_id: str | None = None
    events: tuple[Envelope[Any], ...] = ()


def deliver(session: Session, message: inbox.Control, *, publisher: str | None = None) -> Verdict:
    """Publish a control to the inbox as `publisher` (None: the CLI's own identity)
    and wait for the intake's verdict. The one path for every control, the web
    view's buttons included."""
    run_id = message.run_id
    state = session.load(run_id)
    if state is None:
        return Verdict(Outcome.NO_RUN, _no_run(session, run_id))
    signer = signer_for(session.settings, publisher)
    if (refusal := _not_granted(session, signer, state)) is not None:
        return Verdict(Outcome.REFUSED, f"{refusal}; nothing was sent")
    if state.status.terminal:
        return Verdict(
            Outcome.ALREADY_ENDED,
            f"run {run_id!r} already ended {state.status}: there is nothing to {_VERB[message.type]}; "
            "nothing was sent",
        )  # fmt: skip
    try:  # the intake's own decision: what it would refuse is not sent
        decide_control(state, message, publisher=signer.name)
    except ControlRefused as exc:
        return Verdict(Outcome.REFUSED, f"run {run_id!r}: {exc.reason}; nothing was sent")
    if (problem := _question_problem(session, state, message)) is not None:
        return Verdict(Outcome.REFUSED, f"run {run_id!r}: {problem}; nothing was sent")
    ttl_s = session.settings.member_ttl_s
    if session.inbox.intake_liveness(ttl_s=ttl_s, publisher=signer.name) is Liveness.NONE:
        return _no_intake(session, sent=False)
    entry_id = session.inbox.publish(message, signer=signer)
    deadline = time.monotonic() + TAKE_S
    while not session.inbox.taken(entry_id):
        if time.monotonic() > deadline and session.inbox.withdraw(entry_id):
            return _no_intake(session, sent=True)
        time.sleep(0.05)
    return _verdict(session, message, entry_id)


def _question_problem(session: Session, state: RunState, message: inbox.Control) -> str | None:
    """A reply to a tool's question (MCP elicitation) that does not answer it."""
    if not isinstance(message, inbox.HumanReplied) or state.escalated_for != "tool_question":
        return None
    from agentledger.services.handlers.tool_requests import answer_problem

    asked = session.store.read(state.run_id, after_seq=(state.escalation or 1) - 1)[:1]
    schema = asked[0].data.question if asked and isinstance(asked[0].data, RunEscalated) else None
    problem = answer_problem(message.text, schema)
    return f"the tool's question is not answered: {problem}" if problem else None


def signer_for(settings: Settings, name: str | None) -> Signer:
    """The publisher `--as` names; without it, the embedded run's own one of this
    state folder (filed only by the embedded run itself: `local_signer`)."""
    path = settings.publishers_path
    if name:
        return publishers_file.signer(path, name)
    local = publishers_file.local_name(settings.state_dir)
    if local not in publishers_file.read(path).publishers:
        raise ConfigError(
            "--as", f"no publisher to sign with: pass --as NAME (the embedded run's own "
            f"{local!r} publisher is not in {path!r})",
        )  # fmt: skip
    return publishers_file.signer(path, local)


def _no_run(session: Session, run_id: str) -> str:
    path = session.settings.publishers_path
    if session.inbox.request_waiting(run_id, path) is not None:
        return f"no run {run_id!r} yet: its request waits in the inbox for the intake; nothing was sent"
    return f"no run {run_id!r}; nothing was sent"


def _not_granted(session: Session, signer: Signer, state: RunState) -> str | None:
    """What the intake would say first, by the same publishers file: the signer may
    not speak for the run's principal."""
    grant = publishers_file.read(session.settings.publishers_path).publishers.get(signer.name)
    return None if grant is None else control_refusal(signer.name, grant, state.spec.principal)


def _verdict(session: Session, message: inbox.Control, entry_id: str) -> Verdict:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (reason := session.inbox.rejected_reason(entry_id)) is not None:
            return Verdict(Outcome.REFUSED, reason, entry_id)
        appended = [e for e in session.reader.read(message.run_id) if e.causation_id == entry_id]
        if appended:
            return Verdict(Outcome.APPENDED, entry_id=entry_id, events=tuple(appended))
        time.sleep(0.1)
    return Verdict(
        Outcome.NO_VERDICT,
        f"an intake took {entry_id} but recorded nothing within {WAIT_S:g}s; it may still act on it",
        entry_id,
    )  # fmt: skip


def _no_intake(session: Session, *, sent: bool) -> Verdict:
    where = f"{masked(session.located.url)} (prefix {session.settings.prefix!r})"
    what = (
        f"nothing took the message within {TAKE_S:g}s; it was withdrawn"
        if sent
        else "nothing was sent"
    )
    return Verdict(
        Outcome.NO_INTAKE,
        f"no intake reads the inbox on {where}: start `agentledger intake` there; {what}",
    )  # fmt: skip


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, no USER/LOGNAME: a container
        return "cli"


def current_escalation(session: Session, run_id: str) -> int:
    """The seq of the run's latest escalation (0: none, or no such run), for an
    answer to name: the one the person sees now."""
    state = session.load(run_id)
    return (state.escalation or 0) if state is not None else 0


ANSWERS = ("reply", "resume", "abort")  # the commands that answer an escalation
AT_A_GATE = {"approve": "resume", "deny": "abort"}  # at a flow's gate: no call to name


def gate_command(session: Session, command: str, run_id: str, call_id: str | None) -> str:
    """The command `approve`/`deny` is at a flow's gate (`human:` stage): there is no
    call to name, so `approve RUN` resumes the flow (approved), `deny RUN` aborts it
    (denied). BadOption when the call id does not fit what the run waits for."""
    if command not in AT_A_GATE:
        return command
    state = session.load(run_id)
    if state is None:
        return command if call_id else AT_A_GATE[command]  # `deliver` says there is no run
    gate = state.status is RunStatus.AWAITING_HUMAN and state.escalated_for == "flow_gate"
    if gate and call_id is not None:
        stage = state.flow.stage if state.flow else ""
        raise BadOption("call_id", f"run {run_id!r} waits at its flow's gate {stage!r}, not "
                        f"on a call: `agentledger {command} {run_id}` (a note: --reason TEXT)")  # fmt: skip
    if not gate and call_id is None:
        raise BadOption("call_id", f"run {run_id!r} is {state.status}, not at a flow's gate: "
                        f"name the call (`agentledger {command} {run_id} CALL`)")  # fmt: skip
    return AT_A_GATE[command] if gate else command


_VERB = {
    "RunCancelRequested": "cancel", "ApprovalGranted": "approve", "ApprovalDenied": "deny",
    "HumanReplied": "reply to", "RunResumed": "resume", "RunAborted": "abort",
}  # fmt: skip


def build(
    command: str,
    run_id: str,
    *,
    call_id: str | None,
    text: str,
    by: str | None,
    escalation: int = 0,
) -> inbox.Control:
    """The control a command sends; `escalation` is the one a reply, resume or
    abort answers (`current_escalation`). BadOption naming the argument the
    message cannot hold (the parser checks each first: this is the last word)."""
    try:
        who = by or user_name()
        return _build(command, run_id, call_id=call_id, text=text, who=who, escalation=escalation)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or command
        raise BadOption(where, f"{shown(str(error.get('input')))} is not accepted here") from None


def _build(
    command: str, run_id: str, *, call_id: str | None, text: str, who: str, escalation: int
) -> inbox.Control:
    match command:
        case "cancel":
            return inbox.RunCancelRequested(run_id=run_id, by=who, reason=text)
        case "approve":
            return inbox.ApprovalGranted(run_id=run_id, call_id=call_id or "", by=who, note=text)
        case "deny":
            return inbox.ApprovalDenied(run_id=run_id, call_id=call_id or "", by=who, note=text)
        case "reply":
            return inbox.HumanReplied(run_id=run_id, by=who, text=text, escalation=escalation)
        case "resume":
            return inbox.RunResumed(run_id=run_id, by=who, note=text, escalation=escalation)
        case "abort":
            return inbox.RunAborted(run_id=run_id, by=who, note=text, escalation=escalation)
    raise ValueError(command)
