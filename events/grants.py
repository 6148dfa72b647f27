"""Who may put what into the inbox: the signature rule and the grant rule, as
pure decisions. An entry is refused, with a reason that starts with what kind
of refusal it is, when it is unsigned, names an unknown publisher, carries a
bad signature, or asks for a principal, scope or task queue its publisher's
grant does not hold. A run holds the scopes its spec asks for *and* the grant
allows — never more; a control is granted by the run's principal.

A signed message is refused as replayed when it carries no `issued_at` or no
nonce, was issued outside the replay window either side of the intake's clock,
or its nonce was seen (the shell keeps the nonces; the window is decided here).
What a run reaches beyond its own log is granted too: a replay model plays only
a run of the same tenant, and a run id a publisher chooses names a shard the
deployment reads.

Grant entries match exactly, or as patterns where `*` stands for any text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from agentledger.schemas.publishers import Publisher
from agentledger.schemas.signature import matches
from agentledger.schemas.spec import Principal

UNSIGNED = "unsigned"
UNKNOWN_PUBLISHER = "unknown publisher"
BAD_SIGNATURE = "bad signature"
REPLAYED = "replayed"
NOT_GRANTED = "not granted"
INVALID = "invalid"


def authentication_refusal(
    name: bytes | None, signature: bytes | None, raw: bytes, *, keys: Mapping[str, str | None]
) -> str | None:
    """Why the entry is not its publisher's (None: it is). `keys` maps each filed
    publisher to its key (None when its key variable is unset)."""
    if not name or not signature:
        missing = [f for f, v in (("publisher", name), ("signature", signature)) if not v]
        return f"{UNSIGNED}: the entry has no {' and no '.join(map(repr, missing))} field"
    who = name.decode("utf-8", errors="replace")
    if who not in keys:
        return f"{UNKNOWN_PUBLISHER}: {who!r} is not in the publishers file"
    key = keys[who]
    if key is None:
        return f"{UNKNOWN_PUBLISHER}: {who!r} has no key (its key_env variable is unset)"
    if not matches(key, raw, signature):
        return f"{BAD_SIGNATURE}: the message is not signed with {who!r}'s key"
    return None


def request_refusal(who: str, grant: Publisher, principal: Principal, queue: str) -> str | None:
    """Why `who` may not create this run (None: it may)."""
    if not principal_granted(grant, principal.id, principal.tenant):
        return f"{NOT_GRANTED}: {who!r} may not act for principal {principal.id}@{principal.tenant}"
    if not any(_match(q, queue) for q in grant.queues):
        return f"{NOT_GRANTED}: {who!r} may not publish to task queue {queue!r}"
    over = [s for s in principal.scopes if s not in held_scopes([s], grant)]
    if over:
        return f"{NOT_GRANTED}: {who!r} may not grant the scopes {over}"
    return None


def control_refusal(who: str, grant: Publisher, run_principal: Principal) -> str | None:
    """Why `who` may not speak to a run acting for `run_principal` (None: it may)."""
    if principal_granted(grant, run_principal.id, run_principal.tenant):
        return None
    where = f"{run_principal.id}@{run_principal.tenant}"
    return f"{NOT_GRANTED}: {who!r} may not control runs of principal {where}"


def held_scopes(asked: Iterable[str], grant: Publisher) -> tuple[str, ...]:
    """The scopes a run holds: those asked for that the grant allows, in the asked order."""
    return tuple(s for s in dict.fromkeys(asked) if any(_match(g, s) for g in grant.scopes))


def principal_granted(grant: Publisher, id_: str, tenant: str) -> bool:
    return any(_match(p.id, id_) and _match(p.tenant, tenant) for p in grant.principals)


def _match(pattern: str, value: str) -> bool:
    """`*` stands for any text. Matched piece by piece with `str.find`, leftmost first
    (enough for a pattern whose only wildcard is `*`), not by a backtracking regex:
    a pattern with many stars cannot make a long value cost polynomial time."""
    if pattern == value or "*" not in pattern:
        return pattern == value
    first, *middle, last = pattern.split("*")
    end = len(value) - len(last)
    if end < len(first) or not value.startswith(first) or not value.endswith(last):
        return False
    at = len(first)
    for part in middle:
        found = value.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True


def freshness_refusal(
    issued_at: float | None, nonce: str | None, *, now: float, window_s: float
) -> str | None:
    """Why a message is refused as replayed by its stamp alone (None: it is fresh).
    A nonce is kept for twice the window, so one accepted within the window is
    still known for as long as its `issued_at` would pass."""
    missing = [f for f, v in (("issued_at", issued_at), ("nonce", nonce)) if v is None]
    if missing:
        return (
            f"{REPLAYED}: the message has no {' and no '.join(missing)}; sign it as `publish` does"
        )
    assert issued_at is not None
    age = now - issued_at
    if age != age or age > window_s:  # nan is never fresh
        return f"{REPLAYED}: issued_at is {age:.0f} s old; the window is {window_s:g} s"
    if -age > window_s:
        return f"{REPLAYED}: issued_at is {-age:.0f} s ahead of the intake's clock; the window is {window_s:g} s"
    return None


def nonce_seen_refusal(nonce: str, seen_at: float) -> str:
    """A nonce seen before, within twice the window."""
    when = datetime.fromtimestamp(seen_at, UTC).isoformat(timespec="milliseconds")
    return f"{REPLAYED}: nonce {nonce!r} was seen at {when}"


def replay_model_refusal(
    who: str, tenant: str, recorded: str, recorded_tenant: str | None
) -> str | None:
    """Why a run of `tenant` may not replay the model replies of run `recorded`
    (None: it may): only an existing run of the same tenant. Whether another
    tenant's run of that id exists is not said."""
    if recorded_tenant is not None and recorded_tenant == tenant:
        return None
    return f"{NOT_GRANTED}: {who!r} may not replay run {recorded!r}: no run of tenant {tenant!r} has that id"


def shard_refusal(run_id: str, named: int | None, shards: int) -> str | None:
    """Why a publisher's run id is refused (None: it is not): its `.s<N>` suffix
    names a shard no reader of this deployment reads."""
    if named is not None and named >= shards:
        return f"{INVALID}: run_id {run_id!r} names shard {named}; this deployment has {shards}"
    return None
