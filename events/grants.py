"""Who may put what into the inbox: the signature rule and the grant rule, as
pure decisions. An entry is refused, with a reason that starts with what kind
of refusal it is, when it is unsigned, names an unknown publisher, carries a
bad signature, or asks for a principal, scope or task queue its publisher's
grant does not hold. A run holds the scopes its spec asks for *and* the grant
allows — never more; a control is granted by the run's principal.

Grant entries match exactly, or as patterns where `*` stands for any text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from schemas.publishers import Publisher
from schemas.signature import matches
from schemas.spec import Principal

UNSIGNED = "unsigned"
UNKNOWN_PUBLISHER = "unknown publisher"
BAD_SIGNATURE = "bad signature"
REPLAYED = "replayed"
NOT_GRANTED = "not granted"


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
