"""`agentledger acl [--apply]`: the Redis ACL users of this deployment's key prefix
(`agentledger.services.adapters.redis.acl`): one per publisher of the publishers file, the
intake, the workers and ops, each with a fresh password. Without --apply it
prints the `ACL SETUSER` commands (for redis-cli, or an operator's own tooling);
with --apply it runs them on the Redis it finds, as the user REDIS_URL names
(one allowed to run ACL), and prints the URL each user connects with. The
passwords are printed once. It says, and never does itself, that Redis's
`default` user should be turned off once an admin user of your own exists (the
ACL-file form in deploy/redis-acl/ does it)."""

from __future__ import annotations

import secrets
import shlex
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from agentledger.services.adapters.publishers import publishers_file
from agentledger.services.adapters.redis.acl import AclUser, rules, server_version, set_user
from agentledger.services.entrypoints.reply import emit, say
from agentledger.services.errors import ConfigError
from agentledger.services.redis_urls import masked
from agentledger.services.session import Session
from agentledger.services.settings import Settings

DEFAULT_NOTE = (
    "Redis's `default` user (no password, every right) stays on until you turn it off: "
    "once an admin user of your own exists, `ACL SETUSER default off` (an ACL file: "
    "`user default off`, as deploy/redis-acl/users.acl has it)"
)


def acl(settings: Settings, session: Session | None, *, as_json: bool) -> int:
    if session is not None:
        _check_version(session)  # before any user is set: never half the rules
    names = sorted(publishers_file.read(settings.publishers_path).publishers)
    rows = {user.name: _row(user, session) for user in rules(settings.prefix, names)}
    if as_json:
        emit({"prefix": settings.prefix, "applied": session is not None, "users": rows,
              "publishers_file": settings.publishers_path, "default_user": DEFAULT_NOTE})  # fmt: skip
        return 0
    for name, row in rows.items():
        print(f"{row['role']} {name}: {row['url']}" if session is not None else row["command"])
    if session is not None:
        say(f"ACL users for prefix {settings.prefix!r} set on {masked(session.located.url)}: each URL "
            "above holds its password, printed once: give each its own")  # fmt: skip
    if not names:
        say(f"no publishers in {settings.publishers_path}: no publisher users")
    say(DEFAULT_NOTE)
    return 0


def _row(user: AclUser, session: Session | None) -> dict[str, Any]:
    """One user with a fresh password: its `ACL SETUSER` command, and with a session
    the command run there and the URL the user connects with."""
    password = secrets.token_urlsafe(24)
    command = user.setuser(password)
    row: dict[str, Any] = {"role": user.role, "password": password, "command": shlex.join(command)}
    if user.publisher is not None:
        row["publisher"] = user.publisher
    if session is not None:
        # the user REDIS_URL names may not run ACL: NoPermissionError, said as such
        if (refused := set_user(session.client, command)) is not None:
            where = masked(session.located.url)
            raise ConfigError(
                "REDIS_URL", f"the Redis at {where!r} refused the rules of {user.name!r}: {refused}"
            )
        row["url"] = _url_as(session.located.url, user.name, password)
    return row


ACL_SELECTORS = (7, 0)  # the rules use selectors: Redis 7 or later


def _check_version(session: Session) -> None:
    version = server_version(session.client)
    if version is None:  # INFO refused to this user: SETUSER says what it refuses
        return
    found = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if found and found < ACL_SELECTORS:
        raise ConfigError(
            "REDIS_URL", f"the Redis at {masked(session.located.url)!r} is {version}: the ACL rules need "
            "Redis 7 or later (key selectors); nothing was set",
        )  # fmt: skip


def _url_as(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(
        parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}")
    )
