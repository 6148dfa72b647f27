"""What a folded state costs a worker's memory, estimated cheaply enough to do on
every step: each event folded adds a fixed share (its envelope's and the state's
small objects) and a multiple of its payload — the fields a tool or a model
makes large (a call's output, a reply's content, a call's input, a check's
evidence) — which the state holds and the context view holds again, rendered.
Payloads are measured by their length (text) or their msgpack size (anything
else): no deep walk of Python objects. The figures come from tracemalloc over
the bench's long runs (`python -m tests.bench.rss --trace 1`): they are to keep a
cache within a budget, not an account."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentledger.events.state import RunState
from agentledger.events.types import (
    AcceptanceChecked,
    ModelResponded,
    RunCreated,
    ToolCallFailed,
    ToolCallProposed,
    ToolCallSucceeded,
)
from agentledger.schemas.codec import pack
from agentledger.schemas.content import TextBlock, ThinkingBlock, ToolUseBlock
from agentledger.schemas.envelope import Envelope
from agentledger.schemas.errors import InvalidEvent

EVENT_BYTES = 1_500  # an event's share of a state besides its payload
PAYLOAD_FACTOR = 3  # the state's objects and the view's rendering, per byte of payload
UNKNOWN_EVENT_BYTES = 4_000  # an event of a state whose events were not seen (a snapshot's)


def grown_by(events: Iterable[Envelope[Any]]) -> int:
    """What folding `events` adds to a state."""
    total = 0
    for e in events:
        total += EVENT_BYTES
        if isinstance(e.data, _WITH_PAYLOAD):  # most events carry nothing a tool or model made
            total += PAYLOAD_FACTOR * payload_bytes(e.data)
    return total


_WITH_PAYLOAD = (
    ToolCallSucceeded,
    ToolCallFailed,
    ModelResponded,
    ToolCallProposed,
    AcceptanceChecked,
)


def guessed(state: RunState) -> int:
    """A state folded from events this process did not see (restored from a snapshot)."""
    return state.seq * UNKNOWN_EVENT_BYTES


def payload_bytes(data: Any) -> int:
    match data:
        case ToolCallSucceeded():
            return _value(data.output) + len(data.stdout or "") + len(data.stderr or "")
        case ToolCallFailed():
            return len(data.error.message) + len(data.stdout or "") + len(data.stderr or "")
        case ModelResponded():
            return sum(_block(b) for b in data.content)
        case ToolCallProposed():
            return _value(data.input)
        case AcceptanceChecked():
            return _value(data.evidence)
        case RunCreated():
            return 0  # the spec is shared between states (and runs): kept by `spec_of`
    return 0


def _block(b: Any) -> int:
    match b:
        case TextBlock():
            return len(b.text)
        case ThinkingBlock():
            return len(b.thinking) + len(b.signature)
        case ToolUseBlock():
            return _value(b.input)
    return _value(b.model_dump(mode="json"))


def _value(v: Any) -> int:
    if isinstance(v, str):
        return len(v)
    try:
        return len(pack(v))
    except InvalidEvent:  # not msgpack-able: a rough length instead, never a failed step
        return len(repr(v))
