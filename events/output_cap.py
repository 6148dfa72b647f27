"""What the model is shown of a tool's output, and what the log keeps of it.

The model sees at most the tool's cap (`DEFAULT_CAP` for a tool that declares
none: a model request never carries an uncapped result), with an explicit
marker of the range shown, the total size, and how to read further (the
built-in read-only tool `read_output(ref, offset)`).

The log keeps every output, but no event larger than the store's cap: a field a
tool makes (a call's output, a failure's message, a check's evidence) whose
encoding would pass it is cut (`cut_event`) — the event keeps the head of the
field's text and an `Overflow` naming the pages of the rest, which the store
writes with the event, in the same append, under the event's id. `read_output`
reads on into those pages; the total it reports is the whole output's."""

from __future__ import annotations

import json
from typing import Any

from agentledger.events.types import (
    AcceptanceChecked,
    Event,
    Overflow,
    ToolCallFailed,
    ToolCallSucceeded,
)
from agentledger.schemas.codec import pack

READ_TOOL = "read_output"
DEFAULT_CAP = 4000  # characters of a result the model sees when its tool declares no cap
PAGE_CHARS = 1 << 16  # characters of an overflow page
RESERVE_BYTES = (
    1 << 16
)  # of an event's cap, for its other fields (stdout, stderr: 8,000 chars each)
REASON_CHARS = 2000  # of a cut check's reason, kept for the feedback the model is given
CUT = (
    ToolCallSucceeded,
    ToolCallFailed,
    AcceptanceChecked,
)  # the events with a field `cut_event` cuts


def capped(
    text: str, *, ref: str, cap: int | None, offset: int = 0, total: int | None = None
) -> str:
    """`text` from `offset`, at most `cap` characters of it, and a marker when that is
    not all of it. `total` is the whole output's length when `text` is only its head
    (the rest in overflow pages)."""
    whole = len(text) if total is None else total
    if whole == len(text) and (cap is None or whole - offset <= cap and offset == 0):
        return text
    end = len(text) if cap is None else min(len(text), offset + cap)
    return window(text[offset:end], ref=ref, offset=offset, total=whole)


def window(shown: str, *, ref: str, offset: int, total: int) -> str:
    """The characters `offset`… of an output of `total`, with the marker saying so."""
    end = offset + len(shown)
    if end >= total:
        return f"{shown}\n[shown: characters {offset}–{end} of {total}; this is the end]"
    marker = (
        f"\n[cut: shown characters {offset}–{end} of {total}; the full output is kept as "
        f"ref {ref!r}: call {READ_TOOL}(ref={ref!r}, offset={end}) to read on]"
    )
    return shown + marker


def output_text(value: Any) -> str:
    """A tool output as text: itself when a string, else its canonical JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def cut_event(data: Event, *, ref: str, max_bytes: int) -> tuple[Event, list[str]]:
    """`data` as the log keeps it, and the overflow pages that go with it (none when it
    fits): a tool-made field larger than `max_bytes` less `RESERVE_BYTES` keeps the
    head of its text that fits, the rest goes to pages. `ref` names the pages (the
    envelope's id: unique, so a retried append never mixes two outputs' pages)."""
    budget = max(1, max_bytes - RESERVE_BYTES)
    match data:
        case ToolCallSucceeded() if not _fits(data.output, budget):
            head, overflow, pages = _cut(data.output, "output", ref, budget)
            return data.model_copy(update={"output": head, "overflow": overflow}), pages
        case ToolCallFailed() if not _fits(data.error.message, budget):
            head, overflow, pages = _cut(data.error.message, "error.message", ref, budget)
            error = data.error.model_copy(update={"message": head})
            return data.model_copy(update={"error": error, "overflow": overflow}), pages
        case AcceptanceChecked() if not _fits(data.evidence, budget):
            head, overflow, pages = _cut(data.evidence, "evidence", ref, budget)
            evidence = {"head": head}
            if isinstance(reason := data.evidence.get("reason"), str):
                evidence["reason"] = reason[:REASON_CHARS]
            return data.model_copy(update={"evidence": evidence, "overflow": overflow}), pages
    return data, []


def _fits(value: Any, budget: int) -> bool:
    if isinstance(value, str):
        return len(value) * 4 <= budget or len(value.encode("utf-8", "surrogatepass")) <= budget
    return len(pack(value)) <= budget


def _cut(value: Any, field: Any, ref: str, budget: int) -> tuple[str, Overflow, list[str]]:
    text = output_text(value)
    # the longest head whose UTF-8 fits; a character cut in two is left out
    head = text[:budget].encode("utf-8", "surrogatepass")[:budget].decode("utf-8", "ignore")
    rest = text[len(head) :]
    pages = [rest[i : i + PAGE_CHARS] for i in range(0, len(rest), PAGE_CHARS)] or [""]
    overflow = Overflow(
        field=field, ref=ref, chars=len(text), head=len(head), page_chars=PAGE_CHARS,
        pages=len(pages),
    )  # fmt: skip
    return head, overflow, pages
