"""What the model is shown of a tool's output: the full output stays in the log;
the model sees at most the tool's cap, with an explicit marker of the range
shown, the total size, and how to read further (the built-in read-only tool
`read_output(ref, offset)`)."""

from __future__ import annotations

READ_TOOL = "read_output"


def capped(text: str, *, ref: str, cap: int | None, offset: int = 0) -> str:
    if cap is None or len(text) - offset <= cap and offset == 0:
        return text
    end = min(len(text), offset + cap)
    shown = text[offset:end]
    if end >= len(text):
        return f"{shown}\n[shown: characters {offset}–{end} of {len(text)}; this is the end]"
    marker = (
        f"\n[cut: shown characters {offset}–{end} of {len(text)}; the full output is kept as "
        f"ref {ref!r}: call {READ_TOOL}(ref={ref!r}, offset={end}) to read on]"
    )
    return shown + marker
