"""The worker pools as dramatiq actors: ids in, one handler call, nothing else.
A process declares them for its one tool set, on the queues of its task queue.

Retrying a message is safe because every handler re-checks the folded run.
A delivery may carry its run on into the other pools' steps (`handlers.carry`):
so the model, tools and acceptance actors share one time limit.
Whether a retry can help is the error's own word (`retryable`): errors of the
core and the contracts never are; a lost connection or a lost race is."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import dramatiq

from agentledger.events.commands import Pool
from agentledger.services.adapters.broker.streams_broker import Route, StreamsBroker
from agentledger.services.handlers.app import App
from agentledger.services.handlers.carry import (
    handle_drive_call,
    handle_request_model,
    handle_run_acceptance,
)
from agentledger.services.handlers.flow import handle_drive_flow
from agentledger.services.handlers.resolve import handle_resolve_call

MINUTE_MS = 60_000
MAX_RETRIES = 3
CARRYING_LIMIT_MS = 60 * MINUTE_MS  # a model call, a tool or checks, and what a delivery carries on


def retry_when(retries: int, exc: BaseException) -> bool:
    return retries < MAX_RETRIES and bool(getattr(exc, "retryable", True))


def declare_actors(
    broker: StreamsBroker,
    app: Callable[[], App],
    *,
    queue: str,
    toolset: str,
    pools: Iterable[Pool],
) -> list[str]:
    """Declare the actors of `pools`; return the dramatiq queue names they read."""
    names = {pool: broker.route(Route(str(pool), queue, toolset)) for pool in pools}
    options: dict[str, Any] = {
        "broker": broker, "retry_when": retry_when, "min_backoff": 200, "max_backoff": 5000
    }  # fmt: skip

    if Pool.MODEL in names:

        @dramatiq.actor(queue_name=names[Pool.MODEL], time_limit=CARRYING_LIMIT_MS, **options)
        def request_model(run_id: str) -> None:
            handle_request_model(app(), run_id)

    if Pool.TOOLS in names:

        @dramatiq.actor(queue_name=names[Pool.TOOLS], time_limit=CARRYING_LIMIT_MS, **options)
        def drive_call(run_id: str, call_id: str) -> None:
            handle_drive_call(app(), run_id, call_id)

        @dramatiq.actor(queue_name=names[Pool.TOOLS], time_limit=10 * MINUTE_MS, **options)
        def resolve_call(run_id: str, call_id: str) -> None:
            handle_resolve_call(app(), run_id, call_id)

        @dramatiq.actor(queue_name=names[Pool.TOOLS], time_limit=10 * MINUTE_MS, **options)
        def drive_flow(run_id: str) -> None:
            handle_drive_flow(app(), run_id)

        @dramatiq.actor(queue_name=names[Pool.TOOLS], time_limit=10 * MINUTE_MS, **options)
        def stop_child(run_id: str) -> None:
            handle_drive_flow(app(), run_id)

    if Pool.ACCEPT in names:

        @dramatiq.actor(queue_name=names[Pool.ACCEPT], time_limit=CARRYING_LIMIT_MS, **options)
        def run_acceptance(run_id: str) -> None:
            handle_run_acceptance(app(), run_id)

    return list(names.values())
