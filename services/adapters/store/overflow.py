"""The stores' share of the event cap (see `agentledger.events.output_cap.cut_event`): the
events as the log keeps them, and the overflow pages each append writes with
them. `as_stored` cuts; the pages of the events it returned wait, per thread,
for the `append` of those same objects (a writer folds what `as_stored`
returned, then appends it), so nothing is cut twice and no page is lost; an
append of events that never went through `as_stored` cuts them itself. The
pages wait until an append of them lands or conflicts: a resend across a Redis
outage sends them again. An event that names pages nobody holds is refused."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from agentledger.events.output_cap import CUT, cut_event
from agentledger.schemas.envelope import Envelope, construct
from agentledger.schemas.errors import InvalidEvent

DEFAULT_MAX_BYTES = 256 << 10  # AGENTLEDGER_EVENT_MAX_BYTES sets it

Pages = dict[str, bytes]  # "<ref>:<n>" -> the page's text (UTF-8)


def page_field(ref: str, n: int) -> str:
    return f"{ref}:{n}"


class Cutter:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self._held = (
            threading.local()
        )  # id(envelope) -> (envelope, its pages), since the last append

    def as_stored(self, events: Sequence[Envelope[Any]]) -> list[Envelope[Any]]:
        held = self._waiting()
        out = []
        for env in events:
            if not isinstance(env.data, CUT):  # nothing a tool made: never cut
                out.append(env)
                continue
            stored, pages = self._cut(env)
            if pages or not _names_pages(stored):  # cut once: its append takes it as it is
                held[id(stored)] = (stored, pages)
            out.append(stored)
        return out

    def for_append(self, events: Sequence[Envelope[Any]]) -> tuple[list[Envelope[Any]], Pages]:
        """The events to write and the pages that go with them."""
        held = self._waiting()
        out: list[Envelope[Any]] = []
        pages: Pages = {}
        for env in events:
            if not isinstance(env.data, CUT):
                out.append(env)
                continue
            found = held.get(id(env))
            if found is not None and found[0] is env:
                stored, texts = env, found[1]
            else:
                stored, texts = self._cut(env)
                if not texts and _names_pages(stored):
                    raise InvalidEvent(
                        f"event {stored.id!r} names overflow pages that are not at hand",
                        field="data.overflow",
                    )
            out.append(stored)
            pages.update((page_field(stored.id, n), t.encode()) for n, t in enumerate(texts))
        return out, pages

    def appended(self) -> None:
        """An append landed or conflicted: what waited for it is done with."""
        self._held.waiting = {}

    def _cut(self, env: Envelope[Any]) -> tuple[Envelope[Any], list[str]]:
        data, pages = cut_event(env.data, ref=env.id, max_bytes=self.max_bytes)
        if not pages:
            return env, []
        return construct({**env.__dict__, "data": data}), pages

    def _waiting(self) -> dict[int, tuple[Envelope[Any], list[str]]]:
        found: dict[int, tuple[Envelope[Any], list[str]]] | None = getattr(
            self._held, "waiting", None
        )
        if found is None:
            found = self._held.waiting = {}
        return found


def _names_pages(env: Envelope[Any]) -> bool:
    """Whether the event names overflow pages of its own (written with it)."""
    overflow = env.data.overflow if isinstance(env.data, CUT) else None
    return overflow is not None and overflow.ref == env.id
