"""The validation pool: is the tool registered, are the arguments valid against
its schema, does the principal hold its scope? The verdict is appended; a
rejection goes back to the model as an error result and the run goes on."""

from __future__ import annotations

from events.state import RunState
from events.tool_step import validate_call
from events.types import Event, FieldError
from services.app import App
from services.steps import run_step

SOURCE = "validate"


def handle_validate_call(app: App, run_id: str, call_id: str) -> None:
    def decide(s: RunState) -> list[Event]:
        call = s.call(call_id)
        if call is None:
            return []
        app.load_tools(s)
        offered = {t.spec.name: t for t in app.registry.of_modules(s.spec.tools)}
        registered = offered.get(call.name)
        reads: list[str] = []
        writes: list[str] = []
        errors: list[FieldError] = []
        if registered is not None:
            args, errors = registered.check(call.input)
            if not errors:
                try:
                    reads, writes = registered.resources(args)
                except Exception as exc:  # the tool's resource rule failed on these arguments
                    errors = [
                        FieldError(loc="(input)", msg=f"resources: {type(exc).__name__}: {exc}")
                    ]
        return validate_call(
            s,
            call_id,
            tool=registered.spec if registered else None,
            known_tools=list(offered),
            field_errors=errors,
            reads=reads,
            writes=writes,
        )

    run_step(app.store, app.clock, run_id, decide, source=SOURCE)
