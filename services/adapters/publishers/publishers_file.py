"""The publishers file on disk: read (again whenever it changes, so a publisher
added or removed reaches running intakes), its keys resolved (`key` in the
file, or `key_env`: a variable of the reading process), and written by
`agentledger publishers add` and by the embedded `run` (its own publisher,
named after its state folder: `local_name`) — atomically, under a lock,
readable by its owner only. The digest of the bytes read (`file_digest`) is
what a deployment records as its agreed file (`publishers_digest`)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import yaml
from pydantic import ValidationError

from agentledger.schemas.publishers import GrantedPrincipal, Publisher, PublishersFile
from agentledger.services import bounded_yaml
from agentledger.services.bounded_yaml import OverLimit
from agentledger.services.errors import ConfigError
from agentledger.services.settings import read_key_variable

VARIABLE = "AGENTLEDGER_PUBLISHERS"
LOCAL_PREFIX = "local-"  # the embedded run's own publisher: every principal, private queues only


@lru_cache(maxsize=1)
def local_grant() -> Publisher:
    """The embedded run's own publisher's grant (its key replaced when filed): built on
    first use, not at import (a model validated at import costs every command its build)."""
    return Publisher(
        key="0" * 64,  # replaced by a fresh key when filed
        principals=(GrantedPrincipal(id="*", tenant="*"),),
        scopes=("*",),
        queues=("run.*",),
        workspaces=("/",),  # the local user is the operator (the state folder is still refused)
    )


@dataclass(frozen=True)
class Signer:
    """A publisher's name and key: what signs its inbox entries."""

    name: str
    key: str


def local_name(state_dir: str) -> str:
    """The embedded run's publisher of a state folder: `local-` and the first 12 hex of
    the sha256 of the folder's real path, so each user's (each folder's) is its own."""
    real = os.path.realpath(state_dir)
    return LOCAL_PREFIX + hashlib.sha256(real.encode()).hexdigest()[:12]


def file_digest(data: bytes) -> str:
    """The digest a deployment records of its publishers file: sha256 of its bytes
    (of no bytes when there is no file)."""
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: str) -> bytes:
    """The file's bytes (none when it does not exist); ConfigError when it cannot be read."""
    try:
        return bounded_yaml.read_bytes(path)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise ConfigError(VARIABLE, f"cannot read {path!r}: {exc.strerror}") from None
    except OverLimit as exc:
        raise ConfigError(VARIABLE, f"{path!r}: {bounded_yaml.problem(exc)}") from None


def read(path: str) -> PublishersFile:
    """The file's publishers; none when it does not exist; ConfigError when it is broken."""
    return parse(read_bytes(path), path)


def parse(raw: bytes, path: str) -> PublishersFile:
    """The publishers in the bytes of the file at `path`; ConfigError when they are broken."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(VARIABLE, f"{path!r}: {_unreadable(exc)} ({exc.reason})") from None
    try:
        data = bounded_yaml.safe_load(text) or {}
        return PublishersFile.model_validate(data)
    except OverLimit as exc:
        raise ConfigError(VARIABLE, f"{path!r}: {bounded_yaml.problem(exc)}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(VARIABLE, f"{path!r} is not YAML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}"
            for e in exc.errors()[:5]
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
            VARIABLE,
            f"no publisher {name!r} in {path!r}: `agentledger publishers add {name} …` files one",
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
    workspaces: Sequence[str] = (),
) -> str:
    """File a new publisher with a fresh key; returns the key. ConfigError when the name is taken."""
    return add_filed(
        path, name, principals=principals, scopes=scopes, queues=queues, workspaces=workspaces
    )[0]


def add_filed(
    path: str,
    name: str,
    *,
    principals: Sequence[GrantedPrincipal],
    scopes: Sequence[str],
    queues: Sequence[str],
    workspaces: Sequence[str] = (),
) -> tuple[str, Filed]:
    """`add`, and the file's digests before and after it."""
    key = secrets.token_hex(32)
    entry = Publisher(
        key=key, principals=tuple(principals), scopes=tuple(scopes), queues=tuple(queues),
        workspaces=tuple(workspaces),
    )  # fmt: skip
    with _locked(path):
        before = read_bytes(path)
        current = parse(before, path)
        if name in current.publishers:
            raise ConfigError(VARIABLE, f"publisher {name!r} is in {path!r} already")
        _write(path, PublishersFile(publishers={**current.publishers, name: entry}))
        return key, Filed(file_digest(before), file_digest(read_bytes(path)))


def local_signer(path: str, state_dir: str) -> tuple[Signer, Filed | None]:
    """The embedded run's own publisher (`local_name` of the state folder), filed the
    first time it is needed; and, when filed now, the file's digests before and after."""
    name = local_name(state_dir)
    filed: Filed | None = None
    if name not in read(path).publishers:
        with _locked(path):
            before = read_bytes(path)
            current = parse(before, path)
            if name not in current.publishers:
                entry = local_grant().model_copy(update={"key": secrets.token_hex(32)})
                _write(path, PublishersFile(publishers={**current.publishers, name: entry}))
                filed = Filed(file_digest(before), file_digest(read_bytes(path)))
    return signer(path, name), filed


@dataclass(frozen=True)
class Filed:
    """A change to the file: its digest before and after (`publishers_digest`)."""

    before: str
    after: str


class Registry:
    """The file as the intake reads it: parsed again when its size or time changes.
    A broken file is an error for every entry (never a stale grant kept in force).
    `digest` is the sha256 of the very bytes `current` parsed."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._file: PublishersFile | ConfigError = PublishersFile()
        self._digest = file_digest(b"")
        self._read = False

    def current(self) -> PublishersFile:
        file, _ = self.snapshot()
        if isinstance(file, ConfigError):
            raise file
        return file

    def digest(self) -> str:
        return self.snapshot()[1]

    def snapshot(self) -> tuple[PublishersFile | ConfigError, str]:
        """The file as parsed (or why it cannot be) and the digest of the bytes parsed."""
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if not self._read or stamp != self._stamp or isinstance(self._file, ConfigError):
                raw = b""
                try:
                    raw = read_bytes(self.path) if stamp is not None else b""
                    self._file = parse(raw, self.path)
                except ConfigError as exc:
                    self._file = exc
                self._digest, self._stamp, self._read = file_digest(raw), stamp, True
            return self._file, self._digest

    def pinned(self) -> Registry:
        """This file as it is now, kept: what one batch of entries is judged by."""
        file, digest = self.snapshot()
        return _Pinned(self.path, file, digest)


class _Pinned(Registry):
    def __init__(self, path: str, file: PublishersFile | ConfigError, digest: str):
        super().__init__(path)
        self._pinned = (file, digest)

    def snapshot(self) -> tuple[PublishersFile | ConfigError, str]:
        return self._pinned


def _write(path: str, content: PublishersFile) -> None:
    data = {
        "publishers": {
            n: p.model_dump(mode="json", exclude_none=True) for n, p in content.publishers.items()
        }
    }
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
