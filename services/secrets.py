"""Secrets at the edge. Two kinds of values are secret here, and go only into a
`Redactor` — never into an event, a key name or a log line:

- the run's own: the environment variables its spec declares (`secrets`), read
  when a run needs them; a spec with `keep_secrets_in_log` keeps these in its log;
- the process's own, redacted from every run (kept in the log or not): the
  password of each Redis URL this process uses, every publisher key of the
  publishers file (inline `key`, or the value of its `key_env`) when this process
  can read the file, and the values of AGENTLEDGER_SECRETS' variables and of
  ALWAYS_SECRET (the model provider's key, the web view's token). They are
  gathered once (`configure`, where a process opens its Redis), and again when
  the publishers file changes (looked at no more than once a CHECK_S).

Every value seen is also taught to the logging filter, so that no log line of
this process shows it, in any of its encoded forms (`agentledger.events.redact`)."""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from functools import lru_cache
from urllib.parse import parse_qs, unquote, urlsplit

from agentledger.events.redact import Redactor, encoded_forms, redactor
from agentledger.schemas.spec import RunSpec
from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.errors import ConfigError
from agentledger.services.settings import Settings, read_key_variable, read_secrets

CHECK_S = 1.0  # the publishers file is looked at (stat) at most this often
REDIS_PASSWORD = "redis_password"
_GENERATIONS = itertools.count(1)  # never the same number twice, whichever holder asks


def redactor_for(spec: RunSpec) -> Redactor:
    """What a run's text passes through before anyone sees it: its declared
    secrets, the process's, and the well-known credential patterns. The variables
    are read once a CHECK_S for the same spec object on a thread (a carried run asks
    at every model request), as the publishers file is looked at."""
    now, generation = time.monotonic(), PROCESS.generation()
    last = getattr(_LAST, "made", None)
    if last is not None and last[0] is spec and last[1] == generation and now - last[3] < CHECK_S:
        kept: Redactor = last[2]
        return kept
    own = read_secrets(spec.secrets)
    LOG_FILTER.learn(own)
    made = _redactor(generation, tuple(sorted(own.items())))
    _LAST.made = (spec, generation, made, now)  # holding the spec: its id is not reused
    return made


_LAST = threading.local()  # this thread's last (spec, process generation, redactor, when)


def stored_redactor(spec: RunSpec) -> Redactor:
    """What a run's events pass through before they are appended: everything
    `redactor_for` redacts, or, for a spec that keeps its secrets in the log, the
    process's secrets only (they are never the run's to keep)."""
    if not spec.keep_secrets_in_log:
        return redactor_for(spec)
    return _process_only(PROCESS.generation())


@lru_cache(maxsize=256)
def _redactor(generation: int, own: tuple[tuple[str, str], ...]) -> Redactor:
    """One redactor per set of values (the run's are read each time, so a changed
    value gets a redactor of its own; so does each generation of the process's)."""
    return redactor({**PROCESS.values(), **dict(own)})


@lru_cache(maxsize=16)
def _process_only(generation: int) -> Redactor:
    return redactor(PROCESS.values(), patterns=False)


def configure(settings: Settings) -> None:
    """Where this process's secrets are: its Redis URLs and publishers file (a
    process opening another Redis adds that one's password to those it knows)."""
    PROCESS.configure(settings)


def redis_passwords(url: str) -> list[str]:
    """The password a Redis URL carries (in its user part, or `?password=`), as
    redis-py uses it (and as it is written in the URL, when that is not one of
    the forms a redactor finds it in anyway)."""
    try:
        parts = urlsplit(url)
        written = parts.password or ""
        found = [unquote(written), *parse_qs(parts.query).get("password", [])]
    except ValueError:
        return []
    if written and written not in encoded_forms(unquote(written)):
        found.append(written)
    return sorted({p for p in found if p})


class ProcessSecrets:
    """The process's own secret values, by name; `generation` moves on whenever
    they change, so redactors made of them are made again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._urls: list[str] = []
        self._path: str | None = None
        self._stamp: object = None
        self._keys: dict[str, str] = {}
        self._values: dict[str, str] = {}
        self._generation = 0
        self._checked = float("-inf")

    def configure(self, settings: Settings) -> None:
        urls = [u for u in (settings.redis_url, settings.probe_url) if u and u not in self._urls]
        if not urls and settings.publishers_path == self._path:
            return
        with self._lock:
            self._urls += urls
            self._path = settings.publishers_path
            self._checked = float("-inf")
            self._stamp = self._read_keys()
            self._refresh()

    def generation(self) -> int:
        """The current generation (the publishers file looked at again when due)."""
        now = time.monotonic()
        if now - self._checked < CHECK_S:
            return self._generation
        with self._lock:
            self._checked = now
            if _stamp(self._path) != self._stamp or not self._generation:
                self._stamp = self._read_keys()
                self._refresh()
            return self._generation

    def values(self) -> dict[str, str]:
        return dict(self._values)

    def _read_keys(self) -> object:
        stamp = _stamp(self._path)
        self._keys = _publisher_keys(self._path) if stamp is not None else {}
        return stamp

    def _refresh(self) -> None:
        values = {**read_secrets(()), **self._keys}
        passwords = sorted({p for url in self._urls for p in redis_passwords(url)})
        for i, password in enumerate(passwords):
            values[REDIS_PASSWORD if i == 0 else f"{REDIS_PASSWORD}_{i + 1}"] = password
        if values != self._values or not self._generation:
            self._values = values
            self._generation = next(_GENERATIONS)
            LOG_FILTER.learn(values)


def _stamp(path: str | None) -> object:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _publisher_keys(path: str | None) -> dict[str, str]:
    """Every key of the publishers file this process can read, by publisher (a
    file it cannot read or parse has none for it: the intake refuses it anyway)."""
    if path is None:
        return {}
    try:
        filed = publishers_file.read(path).publishers
    except ConfigError:
        return {}
    keys: dict[str, str] = {}
    for name, publisher in filed.items():
        key = (
            publisher.key
            if publisher.key is not None
            else read_key_variable(publisher.key_env or "")
        )
        if key:
            keys[f"publisher_key:{name}"] = key
    return keys


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
PROCESS = ProcessSecrets()


def install_log_filter() -> None:
    """Put the filter on every handler of the root logger (after basicConfig)."""
    for handler in logging.getLogger().handlers:
        if LOG_FILTER not in handler.filters:
            handler.addFilter(LOG_FILTER)
