"""`agentledger acl [--apply]`: one Redis ACL user per role (publisher, workers,
ops) for this deployment's key prefix (`services.adapters.redis.acl`), each
with a fresh password. Without --apply it prints the `ACL SETUSER` commands
(for redis-cli, or an operator's own tooling); with --apply it runs them on
the Redis it finds, as the user REDIS_URL names (one allowed to run ACL), and
prints the URL each role connects with. The passwords are printed once."""

from __future__ import annotations

import secrets
import shlex
from urllib.parse import quote, urlsplit, urlunsplit

from services.adapters.redis.acl import rules
from services.entrypoints.cli.reply import emit, say
from services.entrypoints.cli.session import Session
from services.settings import Settings, masked


def acl(settings: Settings, session: Session | None, *, as_json: bool) -> int:
    users = rules(settings.prefix)
    passwords = {u.role: secrets.token_urlsafe(24) for u in users}
    rows = {}
    for user in users:
        command = user.setuser(passwords[user.role])
        row = {"user": user.name, "password": passwords[user.role], "command": shlex.join(command)}
        if session is not None:
            session.client.execute_command(*command)  # type: ignore[no-untyped-call]
            row["url"] = _url_as(session.located.url, user.name, passwords[user.role])
        rows[user.role] = row
    if as_json:
        emit({"prefix": settings.prefix, "applied": session is not None, "users": rows})
        return 0
    for role, row in rows.items():
        print(f"{role}: {row['url']}" if session is not None else row["command"])
    if session is not None:
        say(f"ACL users for prefix {settings.prefix!r} set on {masked(session.located.url)}: each URL "
            "above holds its password, printed once: give each role its own")  # fmt: skip
    return 0


def _url_as(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"))
