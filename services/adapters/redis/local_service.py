"""The local Redis service: one redis-server per user state folder, started on
first need as a daemon (its own session, so no command's exit or Ctrl-C takes
it away), with AOF (`appendfsync everysec`) in `<state>/redis/`. Every command
finds it from any folder through the files there: `url` (where it listens) and
`redis.pid`. It is stopped only by `stop()` (`agentledger local stop`).

Starting and stopping hold an exclusive lock on `<state>/redis.lock`, so two
commands starting at once end up with one server."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from agentledger.services.adapters.redis.local_server import free_port, redis_server_binary
from agentledger.services.errors import RedisUnavailable, ServiceBusy

START_TIMEOUT_S = 60.0  # to answer, or to load more of its AOF (a large one loads for longer)
STOP_TIMEOUT_S = 15.0
PORT_ATTEMPTS = 3  # a free port can be taken by someone else before the server binds it


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    state_dir: str
    running: bool
    url: str | None = None
    pid: int | None = None
    version: str | None = None
    uptime_s: int | None = None
    other_clients: int | None = None
    keys: int | None = None  # None while it loads
    has_data: bool = False  # an AOF from an earlier start
    loading_perc: float | None = None  # how much of its AOF it has loaded, while it loads

    def as_dict(self) -> dict[str, Any]:
        return {
            "state_dir": self.state_dir,
            "running": self.running,
            "url": self.url,
            "pid": self.pid,
            "redis_version": self.version,
            "uptime_s": self.uptime_s,
            "other_clients": self.other_clients,
            "keys": self.keys,
            "has_data": self.has_data,
            "loading": self.loading_perc is not None,
            "loading_perc": self.loading_perc,
        }


class LocalService:
    def __init__(self, state_dir: str | os.PathLike[str]):
        self.root = Path(state_dir)
        self.data = self.root / "redis"
        self._url_file = self.data / "url"
        self._pid_file = self.data / "redis.pid"
        self.log_file = self.data / "redis.log"

    # -- finding ---------------------------------------------------------------------------

    def running_url(self) -> str | None:
        """Where the service answers now (maybe still loading its AOF), or None. A
        server on the recorded port that is not the one in redis.pid (ours died,
        another took the port) is not it."""
        url, pid = self._recorded_url(), self._live_pid()
        return url if url and pid is not None and _answer(url, pid) is not None else None

    def ready_url(self, waiting: Waiting | None = None) -> str | None:
        """Where the service answers with its AOF loaded, waiting while it loads
        (`waiting` is told once how far it got); None when it is not running."""
        url, pid = self._recorded_url(), self._live_pid()
        if not url or pid is None or _answer(url, pid) is None:
            return None
        return url if self._await(url, pid, waiting) else None

    def status(self) -> ServiceStatus:
        url = self.running_url()
        has_data = self.data.is_dir() and any(
            p.name.startswith("appendonly") for p in self.data.iterdir()
        )
        if url is None:
            return ServiceStatus(str(self.root), False, has_data=has_data)
        client = redis.Redis.from_url(url, socket_timeout=5)
        try:
            info = client.info("server")
            others = _other_clients(client)
            perc = _loading_perc(
                client.info("persistence")
            )  # INFO and CLIENT answer while it loads
            keys = int(client.dbsize()) if perc is None else None
        except (redis.ConnectionError, redis.TimeoutError):  # BusyLoadingError: it began loading
            return ServiceStatus(str(self.root), False, has_data=has_data)
        finally:
            client.close()
        return ServiceStatus(
            str(self.root), True, url, _int(info.get("process_id")), str(info.get("redis_version")),
            _int(info.get("uptime_in_seconds")), others, keys, has_data, perc,
        )  # fmt: skip

    # -- starting and stopping ------------------------------------------------------------

    def start(self, waiting: Waiting | None = None) -> tuple[str, bool]:
        """The service's URL once its AOF is loaded, and whether this call started it."""
        with self._locked():
            url, pid = self._recorded_url(), self._live_pid()
            if pid is not None:
                if url and self._await(url, pid, waiting):
                    return url, False  # running, or it was still loading its AOF
                _kill(pid)  # alive but not answering: never two servers on one AOF
            return self._launch(waiting), True

    def stop(self, *, force: bool = False) -> bool:
        """Stop the service; False when it was not running. Unless `force`, refuse
        (ServiceBusy) while other clients are connected: a run, workers or a tail."""
        with self._locked():
            url, pid = self._recorded_url(), self._live_pid()
            if not url or pid is None or _answer(url, pid) is None:
                if pid is not None:  # a server that does not answer (hung, or still loading)
                    _kill(pid)
                self._forget()
                return pid is not None
            client = redis.Redis.from_url(url, socket_timeout=5)
            try:
                others = _other_clients(client)
                if others and not force:
                    raise ServiceBusy(others)
                with contextlib.suppress(redis.ConnectionError):
                    client.shutdown()  # the AOF is flushed and fsynced first
            finally:
                client.close()
            if not _wait_gone(pid, STOP_TIMEOUT_S):
                _kill(pid)
            self._forget()
            return True

    def _launch(self, waiting: Waiting | None) -> str:
        self.data.mkdir(parents=True, exist_ok=True, mode=0o700)
        binary = redis_server_binary()
        previous = self._recorded_port()
        last_error = ""
        for attempt in range(PORT_ATTEMPTS):
            # the same port as last time when it is free: URLs a user noted keep working
            port = previous if attempt == 0 and previous and _port_free(previous) else free_port()
            self._pid_file.unlink(missing_ok=True)
            log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
            args = [
                binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.data),
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                "--daemonize", "yes", "--pidfile", str(self._pid_file),
                "--logfile", str(self.log_file),
            ]  # fmt: skip
            # the server forks into a session of its own and closes our stdio
            launcher = subprocess.run(
                args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, timeout=30, check=False,
            )  # fmt: skip
            url = f"redis://127.0.0.1:{port}/0"
            if launcher.returncode == 0 and self._await(url, None, waiting):
                self._url_file.write_text(url + "\n")
                return url
            last_error = launcher.stderr.decode(errors="replace").strip() or self._log_since(
                log_size
            )
            if "Address already in use" not in last_error:
                break
        raise RedisUnavailable(
            f"the local Redis service did not start (state in {self.root}): {last_error[-600:]}"
        )

    def _await(self, url: str, pid: int | None, waiting: Waiting | None) -> bool:
        """Wait until the server at `url` answers as process `pid` (None: the one
        the pid file names once the daemon writes it) with its AOF loaded, while
        that process lives and, once it answers, goes on loading."""
        deadline = time.monotonic() + START_TIMEOUT_S
        told, got = False, -1.0
        while time.monotonic() < deadline:
            pid = pid if pid is not None else self._live_pid(wait_for_file=True)
            if pid is None or not _alive(pid):
                return False
            answer = _answer(url, pid)
            perc = answer.loading_perc if answer is not None else None
            if answer is not None and perc is None:
                return True
            if perc is not None and perc > got:  # it is getting there
                got, deadline = perc, time.monotonic() + START_TIMEOUT_S
                if waiting is not None and not told:
                    waiting(url, got)
                    told = True
            time.sleep(0.05)
        return False

    # -- the files ------------------------------------------------------------------------

    def _recorded_url(self) -> str | None:
        try:
            return self._url_file.read_text().strip() or None
        except OSError:
            return None

    def _recorded_port(self) -> int | None:
        url = self._recorded_url()
        try:
            return int(url.rsplit(":", 1)[1].split("/")[0]) if url else None
        except (IndexError, ValueError):
            return None

    def _live_pid(self, *, wait_for_file: bool = False) -> int | None:
        """The pid in redis.pid when that process is alive and a redis-server."""
        for _ in range(40 if wait_for_file else 1):  # the daemon writes it just after forking
            try:
                pid = int(self._pid_file.read_text().strip())
            except (OSError, ValueError):
                if wait_for_file:
                    time.sleep(0.05)
                    continue
                return None
            return pid if _alive(pid) and _is_redis(pid) else None
        return None

    def _forget(self) -> None:
        self._url_file.unlink(missing_ok=True)
        self._pid_file.unlink(missing_ok=True)

    def _log_since(self, offset: int) -> str:
        try:
            with self.log_file.open("rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with (self.root / "redis.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


Waiting = Callable[[str, float], None]  # told the URL and the % of its AOF loaded so far


@dataclass(frozen=True, slots=True)
class Answer:
    loading_perc: float | None  # how much of its AOF it has loaded; None: all of it


def _answer(url: str, pid: int) -> Answer | None:
    """How the server at `url` answers when it is process `pid` (INFO answers
    while it loads its AOF; data commands would not); None when it does not."""
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=2)
    try:
        if _int(client.info("server").get("process_id")) != pid:
            return None
        info = client.info("persistence")
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError, OSError):
        return None  # BusyLoadingError included: not yet
    finally:
        client.close()
    return Answer(_loading_perc(info))


def _loading_perc(persistence: dict[str, Any]) -> float | None:
    """From INFO persistence: how much of its AOF the server has loaded; None once done."""
    return float(persistence.get("loading_loaded_perc", 0)) if persistence.get("loading") else None


def _other_clients(client: redis.Redis) -> int:
    me = client.client_id()
    return sum(1 for c in client.client_list() if int(c["id"]) != me)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Dead, not yet reaped (a container's pid 1 may never reap the daemon)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc here, or it is gone just now
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _is_redis(pid: int) -> bool:
    try:
        return b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: trust the pid file


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and _is_redis(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, STOP_TIMEOUT_S):
            os.kill(pid, signal.SIGKILL)


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return None
