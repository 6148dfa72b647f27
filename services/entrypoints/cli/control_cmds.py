"""cancel, approve, deny, reply, resume, abort on the command line: each control
goes through the controls both entrypoints share (`agentledger.services.entrypoints.controls`:
published to the inbox, the intake's verdict awaited), printed here — the events
the intake appended, or the failure with its exit code — with the attach to
type when no process serves the embedded run any more."""

from __future__ import annotations

from typing import assert_never

from agentledger.schemas import inbox
from agentledger.services.entrypoints.cli import exit_codes
from agentledger.services.entrypoints.cli.embedded import after_control, intake_while_delivering
from agentledger.services.entrypoints.controls import Outcome, deliver
from agentledger.services.entrypoints.describe import line
from agentledger.services.entrypoints.reply import emit, fail, say
from agentledger.services.session import Session


def exit_code(outcome: Outcome) -> int:
    """The exit code of a control's outcome."""
    match outcome:
        case Outcome.APPENDED:
            return 0
        case Outcome.NO_RUN | Outcome.REFUSED | Outcome.ALREADY_ENDED:
            return exit_codes.USAGE
        case Outcome.NO_INTAKE | Outcome.NO_VERDICT:
            return exit_codes.NO_WORKERS
        case _:
            assert_never(outcome)


def send(
    session: Session, message: inbox.Control, *, as_json: bool, publisher: str | None = None
) -> int:
    with intake_while_delivering(session, message.run_id, publisher):
        verdict = deliver(session, message, publisher=publisher)
    if verdict.outcome is not Outcome.APPENDED:
        return fail(exit_code(verdict.outcome), str(verdict.outcome), verdict.message, as_json)
    go_on = after_control(session, message.run_id)
    if as_json:
        emit({
            "run_id": message.run_id, "control": message.type, "entry_id": verdict.entry_id,
            "events": [e.model_dump(mode="json") for e in verdict.events],
            **({"next": [go_on]} if go_on else {}),
        })  # fmt: skip
    else:
        for env in verdict.events:
            print(line(env))
        _say_go_on(message.run_id, go_on)
    return 0


def _say_go_on(run_id: str, go_on: str | None) -> None:
    """An embedded run no process serves goes on only when attached: say how."""
    if go_on:
        say(
            f"no process serves run {run_id} (the run command that started it has exited): `{go_on}` goes on with it"
        )
