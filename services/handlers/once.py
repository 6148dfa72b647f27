"""A write runs at most once per operation key: the ledger says run, replay the
stored result, refuse (same key, different request), or wait (the same
operation is pending: in flight, or its outcome unknown). What the ledger
keeps of a result is redacted as the run's log is: no secret reaches Redis
through it."""

from __future__ import annotations

from collections.abc import Callable

from events.idempotency import request_hash
from events.state import Call, RunState
from events.tool_step import Errored, Outcome, Succeeded
from events.types import ToolError
from services.handlers.app import App
from services.secrets import redactor_for


def run_once(
    app: App, state: RunState, call: Call, owner: str, run: Callable[[], Outcome]
) -> Outcome:
    if call.op_key is None:
        return run()
    request = call.request_hash or request_hash(call.input)
    verdict = app.ledger.begin(call.op_key, request, owner, now=app.clock.now())
    match verdict.action:
        case "replay":
            return Succeeded(verdict.result, replay_of=verdict.owner)
        case "conflict":
            message = f"idempotency_conflict: operation key {call.op_key} was used by {verdict.owner} for a different request"
            return Errored(ToolError(code="conflict", message=message, retryable=False))
        case "in_progress":
            age = app.clock.now() - verdict.since
            message = f"the same operation ({verdict.owner}) is pending for {age:.1f}s; its outcome is not known yet"
            return Errored(ToolError(code="conflict", message=message, retryable=True))
    outcome = run()
    match outcome:
        case Succeeded(output):
            kept = output if state.spec.keep_secrets_in_log else redactor_for(state.spec).value(output)
            app.ledger.finish(call.op_key, request, owner, kept, now=app.clock.now())
        case Errored():
            app.ledger.abandon(call.op_key)  # the tool said it failed: the key may be used again
    return outcome  # timed out or stopped: it stays pending until resolved
