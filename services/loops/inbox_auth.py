"""Whose an inbox entry is, before a byte of it is parsed: the size limit, then
the signature (HMAC-SHA256 over the raw `message` with the named publisher's
key, as `schemas.signature` computes it). Refusals are `Rejected`, their
reasons from `events.grants`."""

from __future__ import annotations

from dataclasses import dataclass

from events.grants import authentication_refusal
from schemas.publishers import Publisher
from services.adapters.publishers.publishers_file import Registry, key_of
from services.errors import ConfigError
from services.loops.inbox_parse import Rejected, check_size


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
    reason = authentication_refusal(fields.get(b"publisher"), fields.get(b"signature"), raw, keys=keys)
    if reason is not None:
        raise Rejected(reason)
    name = fields[b"publisher"].decode()
    return Granted(name, filed[name])
