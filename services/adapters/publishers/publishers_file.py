"""The publishers file on disk: read (again whenever it changes, so a publisher
added or removed reaches running intakes), its keys resolved (`key` in the
file, or `key_env`: a variable of the reading process), and written by
`agentledger publishers add` and by the embedded `run` (its own `local`
publisher) — atomically, under a lock, readable by its owner only."""

from __future__ import annotations

import fcntl
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import yaml
from pydantic import ValidationError

from schemas.publishers import GrantedPrincipal, Publisher, PublishersFile
from services import bounded_yaml
from services.bounded_yaml import OverLimit
from services.errors import ConfigError
from services.settings import read_key_variable

VARIABLE = "AGENTLEDGER_PUBLISHERS"
LOCAL = "local"  # the embedded run's own publisher: every principal, private queues only
LOCAL_GRANT = Publisher(
    key="0" * 64,  # replaced by a fresh key when filed
    principals=(GrantedPrincipal(id="*", tenant="*"),),
    scopes=("*",),
    queues=("run.*",),
)


@dataclass(frozen=True)
class Signer:
    """A publisher's name and key: what signs its inbox entries."""

    name: str
    key: str


def read(path: str) -> PublishersFile:
    """The file's publishers; none when it does not exist; ConfigError when it is broken."""
    try:
        text = bounded_yaml.read_text(path)
    except FileNotFoundError:
        return PublishersFile()
    except OSError as exc:
        raise ConfigError(VARIABLE, f"cannot read {path!r}: {exc.strerror}") from None
    except (OverLimit, UnicodeDecodeError) as exc:
        raise ConfigError(VARIABLE, f"{path!r}: {_unreadable(exc)}") from None
    try:
        data = bounded_yaml.safe_load(text) or {}
        return PublishersFile.model_validate(data)
    except OverLimit as exc:
        raise ConfigError(VARIABLE, f"{path!r}: {bounded_yaml.problem(exc)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(VARIABLE, f"{path!r} is not YAML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ConfigError(VARIABLE, f"{path!r}: {problems}") from None


def _unreadable(exc: Exception) -> str:
    return bounded_yaml.problem(exc) if isinstance(exc, OverLimit) else "not a text file (UTF-8)"


def key_of(publisher: Publisher) -> str | None:
    """Its key (hex): in the file, or in its variable (None when unset or not hex)."""
    key = publisher.key if publisher.key is not None else read_key_variable(publisher.key_env or "")
    if key is None:
        return None
    try:
        bytes.fromhex(key)
    except ValueError:
        return None
    return key


def signer(path: str, name: str) -> Signer:
    """The signer of publisher `name`, for `--as`: ConfigError when it is not filed or keyless."""
    filed = read(path).publishers.get(name)
    if filed is None:
        raise ConfigError(
            VARIABLE, f"no publisher {name!r} in {path!r}: `agentledger publishers add {name} …` files one"
        )
    key = key_of(filed)
    if key is None:
        raise ConfigError(VARIABLE, f"publisher {name!r} has no key here: set ${filed.key_env}")
    return Signer(name, key)


def add(
    path: str,
    name: str,
    *,
    principals: Sequence[GrantedPrincipal],
    scopes: Sequence[str],
    queues: Sequence[str],
) -> str:
    """File a new publisher with a fresh key; returns the key. ConfigError when the name is taken."""
    key = secrets.token_hex(32)
    entry = Publisher(key=key, principals=tuple(principals), scopes=tuple(scopes), queues=tuple(queues))
    with _locked(path):
        current = read(path)
        if name in current.publishers:
            raise ConfigError(VARIABLE, f"publisher {name!r} is in {path!r} already")
        _write(path, PublishersFile(publishers={**current.publishers, name: entry}))
    return key


def local_signer(path: str) -> Signer:
    """The embedded run's own publisher, filed the first time it is needed."""
    filed = read(path).publishers.get(LOCAL)
    if filed is None:
        with _locked(path):
            current = read(path)
            if LOCAL not in current.publishers:
                entry = LOCAL_GRANT.model_copy(update={"key": secrets.token_hex(32)})
                _write(path, PublishersFile(publishers={**current.publishers, LOCAL: entry}))
    return signer(path, LOCAL)


class Registry:
    """The file as the intake reads it: parsed again when its size or time changes.
    A broken file is an error for every entry (never a stale grant kept in force)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._file: PublishersFile | ConfigError = PublishersFile()

    def current(self) -> PublishersFile:
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp or isinstance(self._file, ConfigError):
                try:
                    self._file = read(self.path) if stamp is not None else PublishersFile()
                except ConfigError as exc:
                    self._file = exc
                self._stamp = stamp
            if isinstance(self._file, ConfigError):
                raise self._file
            return self._file


def _write(path: str, content: PublishersFile) -> None:
    data = {"publishers": {n: p.model_dump(mode="json", exclude_none=True) for n, p in content.publishers.items()}}
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".publishers-")
    try:
        with os.fdopen(fd, "w") as f:  # mkstemp: mode 0600, the owner's only
            yaml.safe_dump(data, f, sort_keys=False, default_flow_style=None)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@contextmanager
def _locked(path: str) -> Iterator[None]:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
