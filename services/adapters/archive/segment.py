"""One archived run as bytes: a magic line, the SHA-256 of the compressed body,
then the body (zlib) — a JSON header line (the run id, how many events, the last
event's id, its overflow pages and request key, when it was archived) and
length-prefixed frames: each event as the store packed it (seq 1, 2, …), then
each overflow page's field and text. `decode` refuses a segment whose checksum,
framing or counts do not hold, naming what is wrong."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

MAGIC = b"AGENTLEDGER-SEGMENT 1\n"
_LEN = struct.Struct(">I")


class SegmentError(Exception):
    """A segment that does not read back as it was written."""


@dataclass(frozen=True, slots=True)
class Segment:
    run_id: str
    entries: list[bytes]  # each event as the store packed it, seq 1… in order
    last_id: str  # the id of the last event: what the log in Redis must still end with
    overflow: Mapping[str, bytes] = field(default_factory=dict)
    request_key: str | None = None  # the run's request key, and what it held (its tombstone)
    request_value: str | None = None
    archived_at: float = 0.0


def encode(seg: Segment) -> bytes:
    header = {
        "run_id": seg.run_id, "events": len(seg.entries), "last_id": seg.last_id,
        "overflow": len(seg.overflow), "request_key": seg.request_key,
        "request_value": seg.request_value, "archived_at": seg.archived_at,
    }  # fmt: skip
    parts = [json.dumps(header, sort_keys=True).encode(), b"\n"]
    for blob in seg.entries:
        parts += [_LEN.pack(len(blob)), blob]
    for name, page in sorted(seg.overflow.items()):
        raw = name.encode()
        parts += [_LEN.pack(len(raw)), raw, _LEN.pack(len(page)), page]
    body = zlib.compress(b"".join(parts), 6)
    return MAGIC + hashlib.sha256(body).digest() + body


def decode(data: bytes) -> Segment:
    if not data.startswith(MAGIC):
        raise SegmentError("not an agentledger segment (its first line is wrong)")
    digest, body = data[len(MAGIC) : len(MAGIC) + 32], data[len(MAGIC) + 32 :]
    if hashlib.sha256(body).digest() != digest:
        raise SegmentError("checksum mismatch: the segment is damaged")
    try:
        raw = zlib.decompress(body)
        line, _, rest = raw.partition(b"\n")
        header = json.loads(line)
        frames = _frames(rest)
        entries = [next(frames) for _ in range(int(header["events"]))]
        overflow = {next(frames).decode(): next(frames) for _ in range(int(header["overflow"]))}
        if next(frames, None) is not None:
            raise SegmentError("bytes after the last frame")
    except (zlib.error, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise SegmentError(f"the segment's body does not read: {exc!r}") from None
    return Segment(
        header["run_id"], entries, header["last_id"], overflow,
        header["request_key"], header["request_value"], float(header["archived_at"]),
    )  # fmt: skip


def _frames(raw: bytes) -> Iterator[bytes]:
    at = 0
    while at < len(raw):
        if at + _LEN.size > len(raw):
            raise ValueError("a frame's length is cut")
        (n,) = _LEN.unpack_from(raw, at)
        at += _LEN.size
        if at + n > len(raw):
            raise ValueError("a frame is cut")
        yield raw[at : at + n]
        at += n
