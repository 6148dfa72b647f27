"""Each event serialised once on its way to the log: the redacting store packs an
event (the codec's msgpack) to scan those bytes for secrets
(`agentledger.events.redact.Redactor.finds_packed`), and the store's append writes the
same bytes (`packed`) instead of packing the event again. The bytes are handed
over for one append, on its thread (`given`), by the envelope object they were made
of; any other envelope is packed when it is written."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agentledger.events.types import CODEC
from agentledger.schemas.envelope import Envelope

Held = Mapping[int, tuple[Envelope[Any], bytes]]  # id(envelope) -> (envelope, its bytes)
_GIVEN = threading.local()


@contextmanager
def given(held: Held) -> Iterator[None]:
    """While an append of this thread runs: the bytes already packed of its events."""
    before = getattr(_GIVEN, "held", None)
    _GIVEN.held = held
    try:
        yield
    finally:
        _GIVEN.held = before


def packed(env: Envelope[Any]) -> bytes:
    """The envelope as the codec packs it: the bytes made of this same object for the
    append under way, else packed now."""
    held: Held | None = getattr(_GIVEN, "held", None)
    if held:
        found = held.get(id(env))
        if found is not None and found[0] is env:
            return found[1]
    return CODEC.encode(env)
