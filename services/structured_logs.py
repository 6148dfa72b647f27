"""Log lines as JSON (`--log-format json`): one object a line on stderr with the
time, level, logger, message and, on every record, the run id, call id, pool
and worker it was written for (null when none), and the trace and span it was
written in (`trace_id`, `span_id`, as the run's trace names them: the run's
span, a tool call's, or the `chat` span of the model request under way —
`agentledger.events.spans`' ids are digests of the run's, so no lookup). The ids come from context
variables a dramatiq middleware (`agentledger.services.adapters.broker.log_context`) sets
around each message (a worker thread has its own context), so no call site
passes them; a step carried on into another pool's work says so itself
(`scope`), and a tool's thread gets a copy of its caller's context. Redaction is the same filter as for text (`agentledger.services.secrets`):
the message and the traceback are redacted before this formatter sees them."""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar, Token
from functools import lru_cache
from typing import Any

from agentledger.events.span_ids import run_span_id, tool_span_id, trace_id_of

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
RUN_ID: ContextVar[str | None] = ContextVar("agentledger_run_id", default=None)
CALL_ID: ContextVar[str | None] = ContextVar("agentledger_call_id", default=None)
POOL: ContextVar[str | None] = ContextVar("agentledger_pool", default=None)
SPAN_ID: ContextVar[str | None] = ContextVar("agentledger_span_id", default=None)  # a chat span
_WORKER: list[str | None] = [None]  # this process's worker name, once it has one
_CHOSEN = {"level": "warning", "format": "text"}  # what `configure` was told: children get it too


class scope:  # noqa: N801 -- used as a `with` statement, like a function
    """Inside, log records carry this run id, call id and pool (then the previous ones)."""

    __slots__ = ("_ids", "_tokens")

    def __init__(self, run_id: str | None, call_id: str | None, pool: str | None):
        self._ids = (run_id, call_id, pool)
        self._tokens: tuple[Token[str | None], ...] = ()

    def __enter__(self) -> None:
        run_id, call_id, pool = self._ids
        self._tokens = (RUN_ID.set(run_id), CALL_ID.set(call_id), POOL.set(pool))

    def __exit__(self, *exc: object) -> None:
        run_token, call_token, pool_token = self._tokens
        POOL.reset(pool_token)
        CALL_ID.reset(call_token)
        RUN_ID.reset(run_token)


def set_worker(name: str) -> None:
    _WORKER[0] = name


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "run_id": (run_id := getattr(record, "run_id", None) or RUN_ID.get()),
            "call_id": (call_id := getattr(record, "call_id", None) or CALL_ID.get()),
            "pool": getattr(record, "pool", None) or POOL.get(),
            "worker": _WORKER[0],
            "thread": record.threadName,
            **_span_ids(run_id, call_id),
        }
        if record.exc_info and not record.exc_text:  # the redacting filter sets it first
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["traceback"] = record.exc_text
        return json.dumps(out, default=str)


def _span_ids(run_id: str | None, call_id: str | None) -> dict[str, str | None]:
    if not run_id:
        return {"trace_id": None, "span_id": None}
    return {"trace_id": _trace(run_id), "span_id": SPAN_ID.get() or _span(run_id, call_id)}


@lru_cache(maxsize=4096)
def _trace(run_id: str) -> str:
    return trace_id_of(run_id)


@lru_cache(maxsize=4096)
def _span(run_id: str, call_id: str | None) -> str:
    return tool_span_id(run_id, call_id) if call_id else run_span_id(run_id)


def configure(level: str, log_format: str) -> None:
    """The root logger's one handler on stderr, at the level and in the format asked."""
    _CHOSEN.update(level=level, format=log_format)
    logging.basicConfig(level=getattr(logging, level.upper()), format=TEXT_FORMAT)
    if log_format == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonLines())


def child_args() -> list[str]:
    """The options that give a child `agentledger` process our logging."""
    return ["--log-level", _CHOSEN["level"], "--log-format", _CHOSEN["format"]]


def chosen_format() -> str:
    return _CHOSEN["format"]
