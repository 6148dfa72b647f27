"""Secrets at the edge. A run spec names environment variables whose values are
secret (`secrets`); their values are read here, when a run needs them, and go
only into a `Redactor` — never into an event. Every value seen is also taught to
the logging filter, so that no log line of this process shows it."""

from __future__ import annotations

import logging
import threading
from functools import lru_cache

from events.redact import Redactor, redactor
from schemas.spec import RunSpec
from services.settings import read_secrets


def redactor_for(spec: RunSpec) -> Redactor:
    values = read_secrets(spec.secrets)
    LOG_FILTER.learn(values)
    return _redactor(tuple(sorted(values.items())))


@lru_cache(maxsize=256)
def _redactor(values: tuple[tuple[str, str], ...]) -> Redactor:
    """One redactor per set of secret values (the environment is read each time,
    so a changed value gets a redactor of its own)."""
    return redactor(dict(values))


class RedactingFilter(logging.Filter):
    """Redacts the well-known credential patterns and every secret value learnt
    so far from a record's message and traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._values: dict[str, str] = {}
        self._redactor = Redactor()
        self._lock = threading.Lock()

    def learn(self, values: dict[str, str]) -> None:
        if all(self._values.get(k) == v for k, v in values.items()):
            return
        with self._lock:
            self._values.update(values)
            self._redactor = redactor(self._values)

    def filter(self, record: logging.LogRecord) -> bool:
        r = self._redactor
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a bad format: logging reports it itself
            return True
        record.msg, record.args = r.text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r.text(record.exc_text)
        return True


LOG_FILTER = RedactingFilter()


def install_log_filter() -> None:
    """Put the filter on every handler of the root logger (after basicConfig)."""
    for handler in logging.getLogger().handlers:
        if LOG_FILTER not in handler.filters:
            handler.addFilter(LOG_FILTER)
