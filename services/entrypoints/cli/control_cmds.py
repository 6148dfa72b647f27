"""cancel, approve, deny, reply, resume, abort: each publishes a control to the
inbox (the CLI is one publisher among others) and waits for the intake to
append it or reject it, printing which."""

from __future__ import annotations

import getpass
import sys
import time

from schemas import inbox
from services.entrypoints.cli import exit_codes
from services.entrypoints.cli.describe import line
from services.entrypoints.cli.session import Session
from services.loops.intake import publish

WAIT_S = 10.0


def send(session: Session, message: inbox.Control) -> int:
    entry_id = publish(session.client, session.keys, message)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (reason := _rejected(session, entry_id)) is not None:
            print(f"agentledger: refused: {reason}", file=sys.stderr)
            return exit_codes.USAGE
        appended = [e for e in session.store.read(message.run_id) if e.causation_id == entry_id]
        if appended:
            for env in appended:
                print(line(env))
            return 0
        time.sleep(0.1)
    print(
        f"published as {entry_id}; no intake took it within {WAIT_S:g}s (are workers running?)",
        file=sys.stderr,
    )
    return exit_codes.STILL_LIVE


def build(
    command: str, run_id: str, *, call_id: str | None, text: str, by: str | None
) -> inbox.Control:
    who = by or getpass.getuser()
    match command:
        case "cancel":
            return inbox.RunCancelRequested(run_id=run_id, by=who, reason=text)
        case "approve":
            return inbox.ApprovalGranted(run_id=run_id, call_id=call_id or "", by=who, note=text)
        case "deny":
            return inbox.ApprovalDenied(run_id=run_id, call_id=call_id or "", by=who, note=text)
        case "reply":
            return inbox.HumanReplied(run_id=run_id, by=who, text=text)
        case "resume":
            return inbox.RunResumed(run_id=run_id, by=who, note=text)
        case "abort":
            return inbox.RunAborted(run_id=run_id, by=who, note=text)
    raise ValueError(command)


def _rejected(session: Session, entry_id: str) -> str | None:
    """`entry_id` is `partition/stream id`, as `publish` returns it."""
    part = int(entry_id.split("/")[0])
    for _, fields in session.client.xrevrange(session.keys.rejected(part), count=200):
        if fields.get(b"entry_id", b"").decode() == entry_id:
            return fields.get(b"reason", b"").decode()
    return None
