"""Causes told in one line, where a person looks first: why an acceptance check
failed (its reason and, for a command that exited non-zero, the last lines it
wrote), and how a run that failed acceptance ended — the failed acceptance
first, then what ended the run after it (the model's next turns, a budget, a
cancel). Pure: the evidence is what the acceptance worker recorded; what is
printed passes the run's redactor on the way out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TAIL_LINES = 2  # of a failed command's output, the last ones that say something
TAIL_CHARS = 160  # the output's tail in a cause, at most
REASON_CHARS = 200  # a check's own reason (a tool check's `got …` can be long)
STREAMS = ("stderr", "stdout")  # a command's stderr when it wrote any, else its stdout
ACCEPTANCE_FAILED = "acceptance_failed"  # RunFailed.reason of a run whose last acceptance failed


def check_cause(evidence: Mapping[str, Any]) -> str:
    """Why a check failed: its recorded reason, and for a command that exited
    non-zero the tail of its stderr (its stdout's when stderr is empty), e.g.
    `exit 1; stderr: …E   assert 2 == 3`."""
    reason = _cap(str(evidence.get("reason") or "failed"), REASON_CHARS)
    if evidence.get("exit_code") in (0, None):
        return reason  # passed its command, or no command: its output is not the cause
    for stream in STREAMS:
        tail = last_lines(evidence.get(f"{stream}_tail"))
        if tail:
            return f"{reason}; {stream}: {tail}"
    return reason


def last_lines(text: Any, *, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last `lines` non-blank lines of `text`, joined by ` | `, at most `chars`
    characters; `…` in front when anything was left out. '' when it has none."""
    if not isinstance(text, str):
        return ""
    said = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    kept = " | ".join(said[-lines:])
    if len(kept) > chars:
        return "…" + kept[-(chars - 1) :]
    return ("…" if len(said) > lines else "") + kept


def acceptance_failure(checks: Sequence[tuple[str, bool, Mapping[str, Any]]]) -> str | None:
    """`acceptance failed (1 of 2 checks: command 'pytest -q' exits 0: exit 1; …)`:
    how many of an acceptance's checks (check, passed, evidence) failed and the
    first one's cause; None when none failed."""
    failed = [(check, evidence) for check, passed, evidence in checks if not passed]
    if not failed:
        return None
    total = len(checks)
    check, evidence = failed[0]
    counted = f"{len(failed)} of {total} check{'s' if total != 1 else ''}"
    return f"acceptance failed ({counted}: {check}: {check_cause(evidence)})"


def after_acceptance(failed: str | None, detail: str) -> str:
    """A run's end told after the acceptance that failed before it, if one did."""
    if failed is None:
        return detail
    return f"{failed}; then: {detail}" if detail else failed


def _cap(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"
