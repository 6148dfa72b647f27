"""Resolving a write whose outcome is unknown, with the tool's own
`lookup(op_key)`; the ledger follows what the lookup found."""

from __future__ import annotations

from agentledger.events.idempotency import request_hash
from agentledger.events.resolution_step import Finding, needs_resolution, resolve_unknown
from agentledger.services.adapters.tools.context import Lookup, ToolContext
from agentledger.services.handlers.app import App
from agentledger.services.handlers.engine import Decided
from agentledger.services.secrets import stored_redactor

SOURCE = "tools"


def handle_resolve_call(app: App, run_id: str, call_id: str) -> None:
    state = app.runs.current(run_id)
    call = state.call(call_id) if state else None
    if state is None or call is None or call.op_key is None or not app.serves(state):
        return
    if not needs_resolution(call, now=app.clock.now()):
        return
    registered = app.toolset.get(call.name)
    found, why = Lookup(done=None), "the tool has no lookup"
    if registered is not None and registered.lookup is not None:
        ctx = ToolContext(
            run_id, call_id, state.workspace, state.spec.principal.id,
            state.spec.principal.tenant, op_key=call.op_key, sandbox=app.sandbox,
        )  # fmt: skip
        try:
            found, why = registered.lookup(call.op_key, call.input, ctx), ""
        except Exception as exc:  # noqa: BLE001 -- the tool's lookup raising anything: still unknown
            why = f"lookup failed: {type(exc).__name__}: {exc}"
    if found.done is True:
        owner = f"{run_id}/{call_id}/{call.attempts}"
        kept = stored_redactor(state.spec).value(found.result)
        request = call.request_hash or request_hash(call.input)
        app.ledger.finish(call.op_key, request, owner, kept, now=app.clock.now())
    elif found.done is False:
        app.ledger.abandon(call.op_key)
    finding = _finding(found.done)
    app.engine.take(
        run_id,
        Decided(
            SOURCE,
            lambda s: resolve_unknown(
                s, call_id, finding=finding, output=found.result, now=app.clock.now(), detail=why
            ),
        ),
    )


def _finding(done: bool | None) -> Finding:
    if done is True:
        return "done"
    return "not_done" if done is False else "unknown"
