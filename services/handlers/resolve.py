"""Resolving a write whose outcome is unknown, with the tool's own
`lookup(op_key)`; the ledger follows what the lookup found."""

from __future__ import annotations

from events.idempotency import request_hash
from events.resolution_step import needs_resolution, resolve_unknown
from services.adapters.tools.registry import Lookup, ToolContext
from services.handlers.app import App
from services.handlers.steps import load, run_step

SOURCE = "tools"


def handle_resolve_call(app: App, run_id: str, call_id: str) -> None:
    state = load(app.store, run_id)
    call = state.call(call_id) if state else None
    if (
        state is None
        or call is None
        or not needs_resolution(call, now=app.clock.now())
        or call.op_key is None
    ):
        return
    app.load_tools(state)
    registered = app.registry.get(call.name)
    found, why = Lookup(done=None), "the tool is not loaded here"
    if registered is not None and registered.lookup is not None:
        ctx = ToolContext(
            run_id,
            call_id,
            state.workspace,
            state.spec.principal.id,
            state.spec.principal.tenant,
            op_key=call.op_key,
        )
        try:
            found, why = registered.lookup(call.op_key, call.input, ctx), ""
        except Exception as exc:  # the lookup itself failed: the outcome stays unknown
            why = f"lookup failed: {type(exc).__name__}: {exc}"
    if found.done is True:
        owner = f"{run_id}/{call_id}/{call.attempts}"
        app.ledger.finish(
            call.op_key,
            call.request_hash or request_hash(call.input),
            owner,
            found.result,
            now=app.clock.now(),
        )
    elif found.done is False:
        app.ledger.abandon(call.op_key)
    finding = {True: "done", False: "not_done", None: "unknown"}[found.done]
    run_step(
        app.store, app.clock, run_id,
        lambda s: resolve_unknown(s, call_id, finding=finding, output=found.result, now=app.clock.now(), detail=why),  # type: ignore[arg-type]
        source=SOURCE,
    )  # fmt: skip
