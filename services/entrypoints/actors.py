"""The worker pools as dramatiq actors: ids in, one handler call, nothing else.

Retrying a message is safe because every handler re-checks the folded run;
errors that a retry cannot fix (`throws=`) are not retried."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dramatiq

from events.commands import (
    Command,
    ExecuteCall,
    Queue,
    RequestModel,
    ResolveCall,
    RunAcceptance,
    ScheduleCalls,
    ValidateCall,
)
from events.errors import CoreError
from schemas.errors import SchemaError
from services.errors import UnknownRun
from services.handlers.accept import handle_run_acceptance
from services.handlers.app import App
from services.handlers.execute import handle_execute_call
from services.handlers.model import handle_request_model
from services.handlers.resolve import handle_resolve_call
from services.handlers.schedule import handle_schedule_calls
from services.handlers.validate import handle_validate_call

NOT_RETRIED = (CoreError, SchemaError, UnknownRun)
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Pools:
    actors: dict[Queue, dramatiq.Actor]  # type: ignore[type-arg]
    resolve: dramatiq.Actor  # type: ignore[type-arg]

    def send(self, command: Command) -> None:
        match command:
            case RequestModel(run_id) | RunAcceptance(run_id):
                self.actors[command.queue].send(run_id)
            case ValidateCall(run_id, call_id) | ExecuteCall(run_id, call_id):
                self.actors[command.queue].send(run_id, call_id)
            case ResolveCall(run_id, call_id):
                self.resolve.send(run_id, call_id)
            case ScheduleCalls(run_id):
                self.actors[command.queue].send(run_id)


def declare_actors(broker: dramatiq.Broker, app: Callable[[], App]) -> Pools:
    options = {"broker": broker, "max_retries": 3, "min_backoff": 200, "throws": NOT_RETRIED}

    @dramatiq.actor(queue_name=Queue.MODEL, time_limit=30 * MINUTE_MS, **options)
    def request_model(run_id: str) -> None:
        handle_request_model(app(), run_id)

    @dramatiq.actor(queue_name=Queue.VALIDATE, time_limit=MINUTE_MS, **options)
    def validate_call(run_id: str, call_id: str) -> None:
        handle_validate_call(app(), run_id, call_id)

    @dramatiq.actor(queue_name=Queue.LOCKS, time_limit=MINUTE_MS, **options)
    def schedule_calls(run_id: str) -> None:
        handle_schedule_calls(app(), run_id)

    @dramatiq.actor(queue_name=Queue.TOOLS, time_limit=60 * MINUTE_MS, **options)
    def execute_tool_call(run_id: str, call_id: str) -> None:
        handle_execute_call(app(), run_id, call_id)

    @dramatiq.actor(queue_name=Queue.TOOLS, time_limit=10 * MINUTE_MS, **options)
    def resolve_tool_call(run_id: str, call_id: str) -> None:
        handle_resolve_call(app(), run_id, call_id)

    @dramatiq.actor(queue_name=Queue.ACCEPT, time_limit=60 * MINUTE_MS, **options)
    def run_acceptance(run_id: str) -> None:
        handle_run_acceptance(app(), run_id)

    return Pools(
        {
            Queue.MODEL: request_model,
            Queue.VALIDATE: validate_call,
            Queue.LOCKS: schedule_calls,
            Queue.TOOLS: execute_tool_call,
            Queue.ACCEPT: run_acceptance,
        },
        resolve=resolve_tool_call,
    )
