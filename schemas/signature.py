"""The signature of an inbox entry, as every publisher computes it: lowercase
hex HMAC-SHA256 over the raw bytes of the entry's `message` field, keyed with
`bytes.fromhex(key)`. The entry carries it in `signature`, beside `publisher`
(the name the key is filed under)."""

from __future__ import annotations

import hashlib
import hmac


def sign(key_hex: str, message: bytes) -> str:
    return hmac.new(bytes.fromhex(key_hex), message, hashlib.sha256).hexdigest()


def matches(key_hex: str, message: bytes, signature: bytes | str) -> bool:
    """Whether `signature` is the message's, compared in constant time."""
    given = (
        signature.decode("ascii", errors="replace") if isinstance(signature, bytes) else signature
    )
    return hmac.compare_digest(sign(key_hex, message), given)


def entry(name: str, key_hex: str, message: bytes) -> dict[str, bytes | str]:
    """The fields of a signed inbox entry."""
    return {"message": message, "publisher": name, "signature": sign(key_hex, message)}
