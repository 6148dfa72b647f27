"""The validation pool: is the tool registered, are the arguments valid against
its schema, does the principal hold its scope, must a person approve it? The
verdict is appended; a rejection goes back to the model as an error result and
the run goes on."""

from __future__ import annotations

from dataclasses import dataclass, field

from events.idempotency import request_hash
from events.state import RunState
from events.types import Event, FieldError
from events.validation_step import validate_call
from services.adapters.tools.registry import RegisteredTool
from services.handlers.app import App
from services.handlers.steps import run_step

SOURCE = "validate"


@dataclass
class Findings:
    errors: list[FieldError] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    approval: str | None = None
    op_key: str | None = None
    request_hash: str | None = None


def handle_validate_call(app: App, run_id: str, call_id: str) -> None:
    def decide(s: RunState) -> list[Event]:
        call = s.call(call_id)
        if call is None:
            return []
        app.load_tools(s)
        offered = {t.spec.name: t for t in app.registry.of_modules(s.spec.tools)}
        registered = offered.get(call.name)
        found = _inspect(registered, call.input, s) if registered else Findings()
        return validate_call(
            s,
            call_id,
            tool=registered.spec if registered else None,
            known_tools=list(offered),
            field_errors=found.errors,
            reads=found.reads,
            writes=found.writes,
            needs_approval=found.approval,
            now=app.clock.now(),
            op_key=found.op_key,
            request_hash=found.request_hash,
            resolvable=bool(registered and registered.lookup),
            output_cap=registered.output_cap if registered else None,
        )

    run_step(app.store, app.clock, run_id, decide, source=SOURCE)


def _inspect(t: RegisteredTool, raw: dict[str, object], s: RunState) -> Findings:
    """Field errors, or the resources, approval reason and operation key of valid arguments."""
    args, errors = t.check(raw)
    if errors:
        return Findings(errors=errors)
    try:
        reads, writes = t.resources(args, s.workspace)
        approval = t.approval_reason(args, s.spec.principal)
        op_key = t.op_key(raw, s.spec.principal.tenant, writes)
        digest = request_hash(t.canonical(raw))
    except Exception as exc:  # the tool's own rules failed on these arguments: tell the model
        return Findings(errors=[FieldError(loc="(input)", msg=f"{type(exc).__name__}: {exc}")])
    return Findings([], reads, writes, approval, op_key, digest)
