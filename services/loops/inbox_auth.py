"""Whose an inbox entry is, before a byte of it is parsed: the size limit, then
the signature (HMAC-SHA256 over the raw `message` with the named publisher's
key, as `agentledger.schemas.signature` computes it). Once parsed, whether it is fresh: its
`issued_at` within the replay window and its nonce never seen before (kept for
twice the window). Refusals are `Rejected`, their reasons from `agentledger.events.grants`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from agentledger.events.grants import authentication_refusal, freshness_refusal, nonce_seen_refusal
from agentledger.schemas.inbox import Control, RunRequested
from agentledger.schemas.publishers import Publisher
from agentledger.services.adapters.publishers.nonces import NonceClaim, Nonces
from agentledger.services.adapters.publishers.publishers_file import Registry, key_of
from agentledger.services.errors import ConfigError
from agentledger.services.loops.inbox_parse import Rejected, check_size


@dataclass(frozen=True)
class Granted:
    """The publisher an entry is signed by, and what it may ask for."""

    name: str
    grant: Publisher


def authenticate(fields: dict[bytes, bytes], registry: Registry, *, max_bytes: int) -> Granted:
    raw = fields.get(b"message")
    if raw is None:
        raise Rejected("no 'message' field")
    check_size(raw, max_bytes)
    try:
        filed = registry.current().publishers
    except ConfigError as exc:  # every entry is refused until the file is mended
        raise Rejected(f"the publishers file is broken: {exc}") from None
    keys = {name: key_of(p) for name, p in filed.items()}
    reason = authentication_refusal(
        fields.get(b"publisher"), fields.get(b"signature"), raw, keys=keys
    )
    if reason is not None:
        raise Rejected(reason)
    name = fields[b"publisher"].decode()
    return Granted(name, filed[name])


def check_fresh(
    message: RunRequested | Control,
    by: Granted,
    nonces: Nonces,
    *,
    partitions: int,
    entry: str,
    now: float,
    window_s: float,
) -> None:
    """Refuse a message as replayed: unstamped, outside the window, or a nonce
    already seen (by another entry: the same entry handed over again is not a
    replay of itself). A nonce is kept under the inbox partition its publisher and
    nonce hash to, not the one the entry came in on: the same bytes put into another
    partition find it too."""
    if reason := freshness_refusal(message.issued_at, message.nonce, now=now, window_s=window_s):
        raise Rejected(reason)
    assert message.nonce is not None
    partition = nonce_partition(by.name, message.nonce, partitions)
    seen_at = nonces.claim(
        partition, by.name, message.nonce, entry=entry, now=now, keep_s=2 * window_s
    )
    if seen_at is not None:
        raise Rejected(nonce_seen_refusal(message.nonce, seen_at))


def fresh_refusals(
    checked: Sequence[tuple[RunRequested | Control, Granted, str]],
    nonces: Nonces,
    *,
    partitions: int,
    now: float,
    window_s: float,
) -> list[str | None]:
    """`check_fresh` of each (message, its publisher, its entry), the nonces claimed
    together: each one's refusal, None when it is fresh."""
    reasons = [
        freshness_refusal(m.issued_at, m.nonce, now=now, window_s=window_s) for m, _, _ in checked
    ]
    todo = [i for i, reason in enumerate(reasons) if reason is None]
    claims = []
    for i in todo:
        message, by, entry = checked[i]
        assert message.nonce is not None
        where = nonce_partition(by.name, message.nonce, partitions)
        claims.append(NonceClaim(where, by.name, message.nonce, entry))
    seen = nonces.claim_many(claims, now=now, keep_s=2 * window_s)
    for i, claim, seen_at in zip(todo, claims, seen, strict=True):
        if seen_at is not None:
            reasons[i] = nonce_seen_refusal(claim.nonce, seen_at)
    return reasons


def nonce_partition(publisher: str, nonce: str, partitions: int) -> int:
    """The inbox partition whose hash tag keeps a publisher's nonce."""
    return int(hashlib.sha256(f"{publisher}\n{nonce}".encode()).hexdigest(), 16) % partitions
