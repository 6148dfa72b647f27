"""What may differ between the output a document shows and the output of the same
command run again, and how two outputs are compared: times, run ids, worker
names, lock tokens, ports, pids, durations, hex digests and temporary paths
become placeholders; runs of spaces become one (columns may widen); a line `...`
stands for any lines, `...` inside a line for any text; a line cut to a width (ending
`…`) matches whatever its last few characters before the cut are.

Events whose presence depends on scheduling, not on what the run did, are left
out of a timeline on both sides, with the sequence numbers they shift (as
tests/e2e/e2ekit.py's `essential` does): a call that waited for a lock whose
release had not landed yet (`ToolCallWaiting`), a model call claimed again after
a busy machine let its claim expire (`ModelRequested … (attempt 2)`). Pure: no I/O."""

from __future__ import annotations

import difflib
import re
from functools import cache

ELLIPSIS = "..."

RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?", "<when>"),
        (r"\b\d{2}:\d{2}:\d{2}(\.\d+)?\b", "<time>"),
        (r"\b1\d{9}(\.\d+)?\b", "<epoch>"),  # unix seconds, in JSON
        (r"\br-[0-9a-f]{8,}(?:(\.[a-z0-9_-]+\.\d+)?\.s\d+)?", r"<run>\1"),  # a child: <run>.stage.N
        (r"\b[\w.-]+:\d+:[0-9a-f]{6}\b", "<worker>"),  # host:pid:random
        (r"#\d{10,}", "#<token>"),  # fencing tokens: microseconds
        (r"\b(127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0):\d+", r"\1:<port>"),
        (r"/tmp/[^\s'\"),]+", "<tmp>"),
        (r"\b[0-9a-f]{12,}\b", "<hex>"),  # digests, fingerprints, keys, trace ids
        (r"token=[\w-]+", "token=<token>"),
        (r"(?<=>)[\w-]{24,}", "<password>"),  # ACL SETUSER … '>password'
        (r"(?<=:)[\w-]{24,}(?=@)", "<password>"),  # redis://user:password@host
        (r"\bpid:? \d+|\"pid\": \d+", "pid <n>"),
        (r"\bredis \d+\.\d+\.\d+", "redis <version>"),
        (r"(?<![\w.])\d+(\.\d+)?\s?(ms|µs|s)\b", "<duration>"),
        (r"[ \t]+", " "),
    )
)


def normalise_line(line: str) -> str:
    for pattern, replacement in RULES:
        line = pattern.sub(replacement, line)
    return line.strip()


INCIDENTAL = re.compile(
    r"^<seq> <time> \S+ (ToolCallWaiting|ModelRequested turn \d+ \(attempt (?!1\))\d+\))"
)
SEQ = (re.compile(r"^\d+ <time> "), "<seq> <time> "), (re.compile(r"\(seq \d+,"), "(seq <n>,")


def normalise(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        shown = normalise_line(line)
        for pattern, replacement in SEQ:
            shown = pattern.sub(replacement, shown)
        if not INCIDENTAL.match(shown):
            out.append(shown)
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:
        out.pop(0)
    return out


CUT, SLACK = "…", 6  # a line cut to a width: where the cut falls moves with the raw ids' length


@cache
def _pattern(expected: str) -> re.Pattern[str]:
    if expected.endswith(CUT) and len(expected) > SLACK + 1:  # its last characters: any
        expected = expected[: -1 - SLACK] + ELLIPSIS + CUT
    return re.compile(".*".join(re.escape(part) for part in expected.split(ELLIPSIS)) + r"\Z")


# a log line (stderr, through logging) may land anywhere among a command's stdout lines:
# the two streams interleave as the terminal got them, which timing decides
LOG_LINE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) agentledger\.")


def unglued(lines: list[str]) -> list[str]:
    """A log line written between a stdout line's text and its newline (print writes
    them apart) on a line of its own, and that stdout line's newline, left after it
    as an empty line, dropped."""
    out: list[str] = []
    skip_blank = False
    for line in lines:
        if skip_blank and line == "":
            skip_blank = False
            continue
        skip_blank = False
        found = LOG_LINE.search(line)
        if found is not None and found.start() > 0:
            out += [line[: found.start()], line[found.start() :]]
            skip_blank = True
            continue
        out.append(line)
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether `actual` is what `expected` shows, both normalised: the log lines in
    their own order, wherever they fell among the others."""
    want, got = normalise(unglued(expected)), normalise(unglued(actual))
    want_logs = [line for line in want if LOG_LINE.match(line)]
    got_logs = [line for line in got if LOG_LINE.match(line)]
    if len(want_logs) != len(got_logs) or not all(
        _pattern(w).match(g) for w, g in zip(want_logs, got_logs, strict=True)
    ):
        return False
    return _in_order(
        [line for line in want if not LOG_LINE.match(line)],
        [line for line in got if not LOG_LINE.match(line)],
    )


def _in_order(want: list[str], got: list[str]) -> bool:
    @cache
    def at(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i] == ELLIPSIS:
            return any(at(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and _pattern(want[i]).match(got[j]) is not None and at(i + 1, j + 1)

    return at(0, 0)


def difference(expected: list[str], actual: list[str]) -> str:
    """The two outputs, normalised, as a unified diff (what the document shows first)."""
    return "\n".join(
        difflib.unified_diff(
            normalise(unglued(expected)),
            normalise(unglued(actual)),
            "shown",
            "printed",
            lineterm="",
            n=2,
        )
    )
