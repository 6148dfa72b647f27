"""The deployment's agreed publishers file: the sha256 of its bytes, recorded in the
deployment's meta hash (`publishers_digest`). A deployment intake records the
digest of its file when none is recorded and refuses to start with another
(`agentledger.services.intake_role`); an operator adopts a new file (`agentledger
publishers adopt`), and `publishers add` (or the embedded run filing its own
publisher) moves the record along with the change it made to a file the
deployment had agreed to. Plain reads and writes: no script, so any user allowed
to write the meta hash can do it."""

from __future__ import annotations

from typing import cast

import redis

from agentledger.services.adapters.publishers.publishers_file import Filed
from agentledger.services.keys import Keys

FIELD = "publishers_digest"


def recorded(client: redis.Redis, keys: Keys) -> str | None:
    """The digest the deployment agreed to; None when none is recorded yet."""
    raw = cast(bytes | None, client.hget(keys.meta, FIELD))
    return raw.decode() if raw is not None else None


def record_first(client: redis.Redis, keys: Keys, digest: str) -> str:
    """Record `digest` unless one is recorded already; returns the one recorded."""
    client.hsetnx(keys.meta, FIELD, digest)
    return recorded(client, keys) or digest


def adopt(client: redis.Redis, keys: Keys, digest: str) -> str | None:
    """Record `digest` whatever was recorded (an operator's act); returns the one before."""
    before = recorded(client, keys)
    client.hset(keys.meta, FIELD, digest)
    return before


def follow(client: redis.Redis, keys: Keys, change: Filed) -> bool:
    """Record the file after `change` if the deployment had agreed to it before (or
    to nothing yet); False when it had agreed to another file (then adopting is an
    operator's explicit act)."""
    now = recorded(client, keys)
    if now is not None and now not in (change.before, change.after):
        return False
    client.hset(keys.meta, FIELD, change.after)
    return True
