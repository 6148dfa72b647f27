"""Where a request's prompt-cache breakpoints go, decided on the context view.

The view grows only at its end while it is under budget, so the prefix a
request shares with the one before it can be read from the provider's cache.
Four breakpoints (the API's limit): the last tool definition, the system text,
the end of the previous request's conversation (its last user block, where
that request's own breakpoint was: a guaranteed cache read however many blocks
the latest turn added) and the end of this one (written for the next request).
Only a user message's non-empty text or tool_result block carries one (the API
refuses them on thinking blocks and empty text)."""

from __future__ import annotations

from collections.abc import Sequence

from agentledger.schemas.content import Message, TextBlock, ToolResultBlock

Spot = tuple[int, int]  # (message index, block index)


def conversation_breakpoints(messages: Sequence[Message]) -> tuple[Spot, ...]:
    """At most two: the previous request's end, then this request's end."""
    spots: list[Spot] = []
    for i in range(len(messages) - 1, -1, -1):
        spot = _last_cacheable(messages[i], i)
        if spot is not None:
            spots.append(spot)
            if len(spots) == 2:
                break
    return tuple(reversed(spots))


def _last_cacheable(m: Message, i: int) -> Spot | None:
    if m.role != "user":
        return None
    for j in range(len(m.content) - 1, -1, -1):
        b = m.content[j]
        if isinstance(b, ToolResultBlock) or (isinstance(b, TextBlock) and b.text):
            return (i, j)
    return None
