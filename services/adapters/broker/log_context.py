"""The dramatiq middleware behind the JSON log lines' ids: around each message
a worker thread runs, it sets the run id, call id and pool that
`agentledger.services.structured_logs` puts on every record. Apart from the formatter so
that a command that runs no workers never imports dramatiq to log."""

from __future__ import annotations

from typing import Any

from dramatiq.middleware import Middleware

from agentledger.services.structured_logs import CALL_ID, POOL, RUN_ID, chosen_format


class LogContext(Middleware):
    """Sets the run id, call id and pool of the message a worker thread runs."""

    def before_process_message(self, broker: Any, message: Any) -> None:
        args = message.args
        route = getattr(broker, "routes", {}).get(message.queue_name)
        RUN_ID.set(str(args[0]) if args else None)
        CALL_ID.set(str(args[1]) if len(args) > 1 else None)
        POOL.set(route.pool if route is not None else None)

    def after_process_message(
        self, broker: Any, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        RUN_ID.set(None)
        CALL_ID.set(None)
        POOL.set(None)

    after_skip_message = after_process_message


def context_middleware() -> list[Middleware]:
    """The middleware the chosen format needs: the ids only matter in JSON lines."""
    return [LogContext()] if chosen_format() == "json" else []
