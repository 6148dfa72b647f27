"""`agentledger publishers add|list|adopt`: the publishers file (who may publish to
the inbox, with which key, and what each may ask for), and the signer `--as NAME`
names for `submit` and the controls. A new publisher's key is printed once,
when it is added; `list` never shows a key. The deployment records the digest
of its agreed file in Redis (`agentledger.services.adapters.publishers.agreed`): `adopt`
records this file's (an operator's act); `add`, and the embedded run filing its
own publisher, move the record along when it can reach Redis and the
deployment had agreed to the file before the change."""

from __future__ import annotations

import os
from collections.abc import Sequence

import redis

from agentledger.events.grants import request_refusal
from agentledger.schemas.publishers import GrantedPrincipal, Publisher
from agentledger.schemas.spec import Principal
from agentledger.services.adapters.publishers import agreed, publishers_file
from agentledger.services.adapters.publishers.publishers_file import Filed, Signer
from agentledger.services.entrypoints.reply import emit, say, say_loading
from agentledger.services.errors import ConfigError, RedisUnavailable
from agentledger.services.session import Session, open_session
from agentledger.services.settings import Settings


def add(
    settings: Settings,
    name: str,
    *,
    principals: Sequence[str],
    scopes: Sequence[str],
    queues: Sequence[str],
    workspaces: Sequence[str] = (),
    as_json: bool,
) -> int:
    path = settings.publishers_path
    granted = [_principal(p) for p in principals]
    roots = [_root(w) for w in workspaces]
    key, change = publishers_file.add_filed(
        path,
        name,
        principals=granted,
        scopes=scopes,
        queues=queues or ["default"],
        workspaces=roots,
    )
    note = _follow(settings, change)
    if as_json:
        emit({"publisher": name, "key": key, "file": path, "publishers_digest": change.after,
              "recorded": note is None})  # fmt: skip
    else:
        print(key)
        say(f"publisher {name!r} filed in {path}; its key is printed once, above: keep it secret")
    if note is not None:
        say(note)
    return 0


def adopt(session: Session, *, as_json: bool) -> int:
    """Record this file's digest as the deployment's (running intakes read with it)."""
    path = session.settings.publishers_path
    digest = publishers_file.file_digest(publishers_file.read_bytes(path))
    publishers_file.read(path)  # a broken file is refused here, not adopted
    before = agreed.adopt(session.client, session.keys, digest)
    if as_json:
        emit({"file": path, "publishers_digest": digest, "before": before})
    else:
        was = "it recorded none" if before is None else f"it recorded sha256 {before}"
        print(f"the deployment's publishers file is now {path} (sha256 {digest}); {was}")
    return 0


def _follow(settings: Settings, change: Filed) -> str | None:
    """Move the deployment's record to the changed file; None when done, else why not."""
    try:
        with open_session(settings, may_start=False, waiting=say_loading) as session:
            return follow_in(session, change)
    except (RedisUnavailable, redis.RedisError) as exc:  # the file is filed: say, do not fail
        return (
            f"the deployment's record of the publishers file is not moved ({exc}); "
            "`agentledger publishers adopt` where Redis is reachable makes this file the deployment's"
        )


def follow_in(session: Session, change: Filed) -> str | None:
    if agreed.follow(session.client, session.keys, change):
        return None
    return (
        f"the deployment records another publishers file than {session.settings.publishers_path}: "
        "its intakes read nothing while theirs differs; `agentledger publishers adopt` makes "
        "this one the deployment's"
    )


def local_signer(session: Session) -> Signer:
    """The embedded run's own publisher, filed on first need (the deployment's record
    of the file moved along with it)."""
    signer, change = publishers_file.local_signer(
        session.settings.publishers_path, session.settings.state_dir
    )
    if change is not None and (note := follow_in(session, change)) is not None:
        say(note)
    return signer


def list_(settings: Settings, *, as_json: bool) -> int:
    path = settings.publishers_path
    filed = publishers_file.read(path).publishers
    rows = {n: _shown(p) for n, p in filed.items()}
    if as_json:
        emit({"file": path, "publishers": rows})
        return 0
    if not rows:
        print(f"no publishers in {path}")
    for n, row in rows.items():
        print(
            f"{n}  principals {', '.join(row['principals'])}  scopes {', '.join(row['scopes']) or '-'}"
            f"  queues {', '.join(row['queues'])}  workspaces {', '.join(row['workspaces']) or '-'}"
            f"  key {row['key']}"
        )
    return 0


def check_grant(settings: Settings, signer: Signer, principal: Principal, queue: str) -> None:
    """Refuse, before publishing, what the intake would refuse by the same file."""
    grant: Publisher | None = publishers_file.read(settings.publishers_path).publishers.get(
        signer.name
    )
    if grant is not None and (refusal := request_refusal(signer.name, grant, principal, queue)):
        raise ConfigError("--as", refusal)


def _principal(text: str) -> GrantedPrincipal:
    id_, at, tenant = text.rpartition("@")
    if not at or not id_ or not tenant:
        raise ConfigError("--principal", f"{text!r} is not ID@TENANT (e.g. alice@shop-1)")
    return GrantedPrincipal(id=id_, tenant=tenant)


def _root(text: str) -> str:
    if not os.path.isabs(text):
        raise ConfigError("--workspaces", f"{text!r} is not an absolute folder (e.g. /srv/ws)")
    return os.path.normpath(text)


def _shown(p: Publisher) -> dict[str, list[str] | str]:
    return {
        "principals": [str(x) for x in p.principals],
        "scopes": list(p.scopes),
        "queues": list(p.queues),
        "workspaces": list(p.workspaces),
        "key": f"${p.key_env}" if p.key_env else "(in the file)",
    }
