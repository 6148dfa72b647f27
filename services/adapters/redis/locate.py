"""Which Redis a command uses: REDIS_URL when set (it must answer); else
AGENTLEDGER_PROBE_URL, when it is set and something answers there; else the
local Redis service of the user's state folder — running already, or started
now when the command may start it (`run` and the read-only commands; `submit`,
`workers` and the controls never do: a run written to a Redis no worker
watches would wait for nobody). Nothing is probed by default: a Redis answering
on 127.0.0.1:6379 may be anybody's, and a user's runs go in it only when asked."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never
from urllib.parse import urlsplit

import redis

from agentledger.services.adapters.redis.local_server import answers
from agentledger.services.adapters.redis.local_service import LocalService, Waiting
from agentledger.services.adapters.redis.not_redis import found_at
from agentledger.services.errors import ConfigError, RedisUnavailable
from agentledger.services.redis_urls import masked
from agentledger.services.settings import Settings


class Origin(StrEnum):
    REDIS_URL = "REDIS_URL"
    PROBE = "probe"
    LOCAL = "local"


@dataclass(frozen=True, slots=True)
class Located:
    url: str
    origin: Origin
    state_dir: str
    started: bool = False

    def notice(self) -> str | None:
        """What the command says on stderr about its Redis: nothing for REDIS_URL."""
        match self.origin:
            case Origin.REDIS_URL:
                return None
            case Origin.PROBE:
                return (
                    f"using the Redis at {masked(self.url)} (AGENTLEDGER_PROBE_URL: it answers "
                    "there; REDIS_URL is unset)"
                )
            case Origin.LOCAL:
                how = "started it" if self.started else "running"
                return (
                    f"using the local Redis service at {self.url} ({how}; data in "
                    f"{self.state_dir}; `agentledger local stop` stops it)"
                )
            case _:
                assert_never(self.origin)


def locate(settings: Settings, *, may_start: bool, waiting: Waiting | None = None) -> Located:
    """`waiting` is told when the local service is still loading its AOF (the command waits)."""
    if settings.redis_url:
        check_reachable("REDIS_URL", settings.redis_url)
        return Located(settings.redis_url, Origin.REDIS_URL, settings.state_dir)
    if settings.probe_url and answers(settings.probe_url):
        check_reachable("AGENTLEDGER_PROBE_URL", settings.probe_url)
        return Located(settings.probe_url, Origin.PROBE, settings.state_dir)
    service = LocalService(settings.state_dir)
    url = service.ready_url(waiting)
    if url is not None:
        return Located(url, Origin.LOCAL, settings.state_dir)
    if not may_start:
        probe = (
            f"nothing answers at AGENTLEDGER_PROBE_URL {masked(settings.probe_url)}, "
            if settings.probe_url
            else ""
        )
        raise RedisUnavailable(
            f"REDIS_URL is unset, {probe}and the local Redis service (data in "
            f"{settings.state_dir}) is not running; this command never starts one. "
            "Start it with `agentledger local start` (or `agentledger run` a spec), "
            "or set REDIS_URL"
        )
    try:
        url, started = service.start(waiting)
    except OSError as exc:  # the state folder cannot be made or written
        if not str(exc.filename or "").startswith(settings.state_dir):
            raise
        raise ConfigError(
            "AGENTLEDGER_STATE_DIR",
            f"{settings.state_dir!r} cannot hold the local Redis service: {exc.strerror} "
            f"({exc.filename})",
        ) from None
    return Located(url, Origin.LOCAL, settings.state_dir, started=started)


def check_reachable(var: str, url: str) -> None:
    """The server at `url` is a Redis that lets us in: it answers PING with PONG.
    Else RedisUnavailable naming `var`, the URL (password masked) and what was
    found: nothing listening, a server that is not Redis (HTTP, TLS, an echo…),
    or a Redis that refused the login; ConfigError naming `var` when a Redis
    answered and refused the rest of the URL (a database it does not have)."""
    shown = f"{var} {masked(url)!r}"
    client = redis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=5.0)
    try:
        pong = client.ping()
    except redis.AuthenticationError as exc:  # NOAUTH, WRONGPASS: a ConnectionError to redis-py
        if urlsplit(url).password is None:
            raise RedisUnavailable(
                f"the Redis at {shown} requires a password and the URL gives none "
                "(redis://[USER]:PASSWORD@HOST:PORT/DB)"
            ) from None
        raise RedisUnavailable(f"the Redis at {shown} refused the login: {exc}") from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise RedisUnavailable(_not_there(shown, url, str(exc))) from None
    except redis.ResponseError as exc:  # e.g. SELECT of a database the server does not have
        raise ConfigError(var, f"{masked(url)!r}: the server refused it: {exc}") from None
    except Exception as exc:  # noqa: BLE001 -- redis-py choking on bytes no Redis sends
        raise RedisUnavailable(_not_there(shown, url, f"{type(exc).__name__}: {exc}")) from None
    finally:
        client.close()
    if pong is not True:
        raise RedisUnavailable(_not_there(shown, url, f"it answered PING with {pong!r}"))


def _not_there(shown: str, url: str, error: str) -> str:
    """Why no Redis is usable at `url`: nothing listens, what listens instead, or
    what the Redis there said."""
    found = found_at(url)
    if found is not None:
        return f"{shown} is not a Redis server: {found}"
    tls = url.startswith("rediss://")
    hint = (
        "; rediss:// speaks TLS: the port must be a TLS one, its certificate trusted" if tls else ""
    )
    return f"nothing answers at {shown} ({error}){hint}"
