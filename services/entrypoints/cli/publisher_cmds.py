"""`agentledger publishers add|list`: the publishers file (who may publish to the
inbox, with which key, and what each may ask for), and the signer `--as NAME`
names for `submit` and the controls. A new publisher's key is printed once,
when it is added; `list` never shows a key."""

from __future__ import annotations

import os
from collections.abc import Sequence

from events.grants import request_refusal
from schemas.publishers import GrantedPrincipal, Publisher
from schemas.spec import Principal
from services.adapters.publishers import publishers_file
from services.adapters.publishers.publishers_file import Signer
from services.entrypoints.cli.reply import emit, say
from services.errors import ConfigError
from services.settings import Settings


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
    key = publishers_file.add(
        path, name, principals=granted, scopes=scopes, queues=queues or ["default"], workspaces=roots
    )
    if as_json:
        emit({"publisher": name, "key": key, "file": path})
    else:
        print(key)
        say(f"publisher {name!r} filed in {path}; its key is printed once, above: keep it secret")
    return 0


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


def signer_for(settings: Settings, name: str | None, *, file_local: bool = False) -> Signer:
    """The publisher `--as` names; without it, the embedded run's own `local` one
    (filed here only by the embedded run itself: `file_local`)."""
    path = settings.publishers_path
    if name:
        return publishers_file.signer(path, name)
    if file_local:
        return publishers_file.local_signer(path)
    if publishers_file.LOCAL not in publishers_file.read(path).publishers:
        raise ConfigError(
            "--as", f"no publisher to sign with: pass --as NAME (the embedded run's own "
            f"{publishers_file.LOCAL!r} publisher is not in {path!r})",
        )  # fmt: skip
    return publishers_file.signer(path, publishers_file.LOCAL)


def check_grant(settings: Settings, signer: Signer, principal: Principal, queue: str) -> None:
    """Refuse, before publishing, what the intake would refuse by the same file."""
    grant: Publisher | None = publishers_file.read(settings.publishers_path).publishers.get(signer.name)
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
