"""`agentledger publishers add|list`: the publishers file (who may publish to the
inbox, with which key, and what each may ask for), and the signer `--as NAME`
names for `submit` and the controls. A new publisher's key is printed once,
when it is added; `list` never shows a key."""

from __future__ import annotations

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
    as_json: bool,
) -> int:
    path = settings.publishers_path
    granted = [_principal(p) for p in principals]
    key = publishers_file.add(path, name, principals=granted, scopes=scopes, queues=queues or ["default"])
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
            f"  queues {', '.join(row['queues'])}  key {row['key']}"
        )
    return 0


def signer_for(settings: Settings, name: str | None) -> Signer:
    """The publisher `--as` names; without it, the embedded run's own `local` one."""
    path = settings.publishers_path
    return publishers_file.signer(path, name) if name else publishers_file.local_signer(path)


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


def _shown(p: Publisher) -> dict[str, list[str] | str]:
    return {
        "principals": [str(x) for x in p.principals],
        "scopes": list(p.scopes),
        "queues": list(p.queues),
        "key": f"${p.key_env}" if p.key_env else "(in the file)",
    }
