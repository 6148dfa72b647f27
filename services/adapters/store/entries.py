"""The store's one decoder of a run stream's entries (id `0-<seq>`, the envelope
packed in field `e`): the store's reads, the read side's raw entries and the
feeds' events all pass through it. Every refusal is an InvalidEvent carrying
the raw bytes."""

from __future__ import annotations

from typing import Any

from agentledger.events.types import CODEC
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent


def decode_entry(entry_id: bytes, fields: dict[bytes, bytes]) -> Envelope[Any]:
    """The envelope a stream entry holds."""
    return decode_raw(entry_id, fields.get(b"e"), fields)


def decode_raw(entry_id: bytes, raw: bytes | None, fields: object = None) -> Envelope[Any]:
    """The envelope of an entry's `e` field; the entry's id must be its seq's."""
    if raw is None:
        shown = repr(fields if fields is not None else entry_id).encode()
        raise InvalidEvent("stream entry has no 'e' field", field="e", raw=shown)
    envelope = CODEC.decode(raw)
    if entry_id != f"0-{envelope.seq}".encode():
        raise InvalidEvent(
            f"stream entry {entry_id.decode()} holds seq {envelope.seq}", field="seq", raw=raw
        )
    return envelope
