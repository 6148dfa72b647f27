"""The repeat detector: a fingerprint of each tool step (tool, canonical
arguments, outcome code), and the streak of identical failing steps at the
end of the run. A streak at the spec's limit sends the run to a human; a
human's reply or resume starts counting afresh."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus


@dataclass(frozen=True, slots=True)
class Fingerprint:
    tool: str
    arguments: str  # canonical JSON
    outcome: str  # "ok" or the error code

    @property
    def failing(self) -> bool:
        return self.outcome != "ok"

    def describe(self) -> str:
        args = json.loads(self.arguments)
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"`{self.outcome}` for {self.tool}({shown})"


def fingerprint(call: Call) -> Fingerprint | None:
    outcome = _outcome(call)
    if outcome is None:
        return None
    return Fingerprint(
        call.name, json.dumps(call.input, sort_keys=True, separators=(",", ":")), outcome
    )


def _outcome(call: Call) -> str | None:
    """ "ok", the error code, or None for a call that has not finished."""
    if not call.status.finished:
        return None
    if call.status is CallStatus.SUCCEEDED:
        return "ok"
    return call.error.code if call.error else "failed"


def failing_streak(s: RunState) -> tuple[int, Fingerprint | None]:
    """How many identical failing steps end the run's record, and which (a step
    that succeeded ends the count before any fingerprint is made)."""
    streak, last = 0, None
    for call in _calls_newest_first(s):
        outcome = _outcome(call)
        if outcome is None:
            continue
        if outcome == "ok":
            break
        fp = fingerprint(call)
        if last is not None and fp != last:
            break
        streak, last = streak + 1, fp
    return streak, last


def consecutive_failures(s: RunState) -> int:
    """Failing steps in a row at the end of the record, whatever they were."""
    count = 0
    for call in _calls_newest_first(s):
        outcome = _outcome(call)
        if outcome is None:
            continue
        if outcome == "ok":
            break
        count += 1
    return count


def _calls_newest_first(s: RunState) -> Iterator[Call]:
    """Newest turn first, without copying the history; stops at a human's word."""
    newest = [s.current_turn] if s.current_turn else []
    for turn in chain(newest, reversed(s.history)):
        if turn.index <= s.counting_from_turn:
            return
        yield from reversed(turn.calls)
