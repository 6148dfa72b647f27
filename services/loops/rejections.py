"""What the rejected stream keeps of an inbox entry the intake refused: a digest
bounded whatever the entry holds. At most `MAX_BYTES` in all (names and values),
at most `MAX_FIELDS` of the original fields, each cut to its share (the
`message` gets what the others leave, its start first: a request's `run_id` is
near it), and for each field cut its full size and sha256; the reason cut too.
A publisher that floods its stream with huge entries costs the rejected stream
4 kB an entry, capped in entries by `AGENTLEDGER_REJECTED_MAXLEN`. Pure: no I/O."""

from __future__ import annotations

import hashlib

MAX_BYTES = 4096  # all a rejection keeps of one entry
MAX_FIELDS = 16  # original fields kept; the rest are only counted
REASON_BYTES = 1024
NAME_BYTES = 64  # of a field's name
OTHER_FIELD_BYTES = 256  # of a field other than `message`
MESSAGE_BYTES = 1536  # kept for the `message` (or what it has) before any other field
FIRST = (b"publisher", b"signature")  # kept before the rest; `message` last, with what is left


def digest(
    entry_id: str, publisher: str, reason: str, fields: dict[bytes, bytes]
) -> dict[str, bytes]:
    """The rejected stream's entry for one refused inbox entry (≤ MAX_BYTES in all)."""
    out: dict[str, bytes] = {
        "entry_id": entry_id.encode()[:128],
        "publisher": publisher.encode()[:NAME_BYTES],
        "reason": _cut(reason.encode(), REASON_BYTES),
        "fields": str(len(fields)).encode(),
    }
    names = _ordered(fields)
    reserve = min(MESSAGE_BYTES, len(fields[b"message"]) + 16) if b"message" in names else 0
    for name in names:
        left = MAX_BYTES - _size(out)
        room = left if name == b"message" else min(left - reserve, OTHER_FIELD_BYTES)
        kept = _kept(name, fields[name], room)
        if kept is not None:
            out.update(kept)
    return out


def _kept(name: bytes, value: bytes, room: int) -> dict[str, bytes] | None:
    """The field whole when it fits in `room`; else its start, its size and its sha256;
    None when not even those fit."""
    label = name[:NAME_BYTES].decode(errors="replace")
    whole = {f"field:{label}": value}
    if _size(whole) <= room:
        return whole
    note = {
        f"size:{label}": str(len(value)).encode(),
        f"sha256:{label}": hashlib.sha256(value).hexdigest().encode(),
    }
    keep = room - _size(note) - len(f"field:{label}".encode())
    if keep < 0:
        return None
    return {f"field:{label}": value[:keep], **note}


def _ordered(fields: dict[bytes, bytes]) -> list[bytes]:
    """At most MAX_FIELDS names: `publisher`, `signature`, others, `message` last."""
    first = [n for n in FIRST if n in fields]
    last = [b"message"] if b"message" in fields else []
    rest = [n for n in fields if n not in FIRST and n != b"message"]
    return [*first, *rest[: MAX_FIELDS - len(first) - len(last)], *last]


def _cut(text: bytes, n: int) -> bytes:
    return text if len(text) <= n else text[: n - 3] + b"..."


def _size(d: dict[str, bytes]) -> int:
    return sum(len(k.encode()) + len(v) for k, v in d.items())
