"""The validation pool: is the tool registered, are the arguments valid against
its schema, does the principal hold its scope, must a person approve it? The
verdict is appended; a rejection goes back to the model as an error result and
the run goes on."""

from __future__ import annotations

from events.state import RunState
from events.types import Event, FieldError
from events.validation_step import validate_call
from services.app import App
from services.steps import run_step
from services.tools import RegisteredTool

SOURCE = "validate"


def handle_validate_call(app: App, run_id: str, call_id: str) -> None:
    def decide(s: RunState) -> list[Event]:
        call = s.call(call_id)
        if call is None:
            return []
        app.load_tools(s)
        offered = {t.spec.name: t for t in app.registry.of_modules(s.spec.tools)}
        registered = offered.get(call.name)
        findings = _inspect(registered, call.input, s) if registered else ([], [], [], None)
        errors, reads, writes, approval = findings
        return validate_call(
            s,
            call_id,
            tool=registered.spec if registered else None,
            known_tools=list(offered),
            field_errors=errors,
            reads=reads,
            writes=writes,
            needs_approval=approval,
            now=app.clock.now(),
            op_key=registered.op_key(call.input, s.spec.principal.tenant, writes)
            if registered
            else None,
            resolvable=bool(registered and registered.lookup),
            output_cap=registered.output_cap if registered else None,
        )

    run_step(app.store, app.clock, run_id, decide, source=SOURCE)


def _inspect(
    t: RegisteredTool, raw: dict[str, object], s: RunState
) -> tuple[list[FieldError], list[str], list[str], str | None]:
    """Field errors, resources read and written, and why approval is needed."""
    args, errors = t.check(raw)
    if errors:
        return errors, [], [], None
    try:
        reads, writes = t.resources(args, s.workspace)
        approval = t.approval_reason(args, s.spec.principal)
    except Exception as exc:  # the tool's own rules failed on these arguments: tell the model
        return [FieldError(loc="(input)", msg=f"{type(exc).__name__}: {exc}")], [], [], None
    return [], reads, writes, approval
