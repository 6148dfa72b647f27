"""A write runs at most once per operation key: the ledger says run, replay the
stored result, refuse (same key, different request), or wait (the same
operation is pending: in flight, or its outcome unknown). What the ledger
keeps of a result is redacted as the run's log is: no secret reaches Redis
through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

from agentledger.events.idempotency import request_hash
from agentledger.events.state import Call, RunState
from agentledger.events.tool_step import Errored, Outcome, Succeeded
from agentledger.events.types import ToolError
from agentledger.services.adapters.ledger.port import Verdict
from agentledger.services.handlers.app import App
from agentledger.services.handlers.outage import through_outage
from agentledger.services.secrets import stored_redactor


def run_once(
    app: App, state: RunState, call: Call, owner: str, run: Callable[[], Outcome]
) -> Outcome:
    if call.op_key is None:
        return run()
    op_key, request = call.op_key, call.request_hash or request_hash(call.input)
    retry_s = app.settings.outcome_retry_s  # what this attempt knows is kept across an outage
    verdict = through_outage(
        lambda: app.ledger.begin(op_key, request, owner, now=app.clock.now()),
        outage_s=retry_s, doing=f"claiming operation {op_key}",
    )  # fmt: skip
    if verdict.action == "in_progress" and verdict.owner == owner:
        verdict = Verdict("run")  # our own begin landed, its reply was lost: resent
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
        case "run":
            pass  # ours to run
        case _:
            assert_never(verdict.action)
    outcome = run()
    match outcome:
        case Succeeded(output):
            kept = stored_redactor(state.spec).value(output)
            through_outage(
                lambda: app.ledger.finish(op_key, request, owner, kept, now=app.clock.now()),
                outage_s=retry_s, doing=f"recording operation {op_key}",
            )  # fmt: skip
        case Errored():  # the tool said it failed: the key may be used again
            through_outage(
                lambda: app.ledger.abandon(op_key), outage_s=retry_s,
                doing=f"releasing operation {op_key}",
            )  # fmt: skip
    return outcome  # timed out or stopped: it stays pending until resolved
