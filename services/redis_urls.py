"""Redis URLs in settings: the check that names the variable of a URL redis-py cannot
use, and the URL as messages show it (its password masked)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit, urlunsplit

from agentledger.services.errors import ConfigError

_SCHEMES = ("redis://", "rediss://", "unix://")


def check_redis_url(var: str, url: str) -> None:
    """A URL redis-py can use, with a numeric port and database: else ConfigError
    naming `var` (the password, if any, left out of the message)."""
    shown = masked(url)
    if not url.startswith(_SCHEMES):
        raise ConfigError(
            var, f"{shown!r} is not a Redis URL (redis://host:port/db, rediss://… or unix://…)"
        )
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(var, f"{shown!r}: the port is not a number from 0 to 65535") from None
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(var, f"{shown!r} names no host (e.g. redis://127.0.0.1:6379/0)")
    if port == 0:
        raise ConfigError(var, f"{shown!r}: port 0 is not a port a server listens on")
    db_texts = parse_qs(parts.query).get("db", [])
    if parts.scheme != "unix" and parts.path not in ("", "/"):
        db_texts.append(parts.path.lstrip("/"))
    for text in db_texts:
        if not text.isdigit():
            raise ConfigError(var, f"{shown!r}: the database {text!r} is not a number (0, 1, …)")


def masked(url: str) -> str:
    """`url` with its password replaced by ***, for messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return url
