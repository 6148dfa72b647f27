"""What-if (issue 39, `agentledger whatif`): a branch of a run, played with the
origin's recorded model replies, compared with the origin call by call. A call is
the same when its tool, input and outcome (output or error code) are — with each
run's workspace path read as `<workspace>`, as the two work in different folders —
and, for a write, when it changed the same files to the same contents. The recorded
replies apply while every call the model saw came out as the origin's: `departed`
says where that ends (the replay model answers no further). Pure: the shell reads
the logs and works out what each write changed from the snapshot store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentledger.events.acceptance_events import AcceptanceChecked, AcceptanceStarted
from agentledger.events.call_events import (
    ToolCallFailed,
    ToolCallProposed,
    ToolCallRejected,
    ToolCallSucceeded,
)
from agentledger.events.run_events import RunCreated
from agentledger.events.time_travel import check_id

Files = tuple[tuple[str, str, str | None], ...]  # path, change, digest after (a write's)


@dataclass(frozen=True, slots=True)
class Step:
    """One call (or check) of a run, reduced to what must repeat."""

    key: str  # the call id, or check-A.I
    turn: int
    name: str
    input: str  # the call's input as canonical JSON ("" for a check)
    outcome: str  # "ok <output>", "error <code>", "rejected <code>", "passed"/"failed"
    is_check: bool = False


def steps(log: Sequence[object]) -> list[Step]:
    """The run's calls in proposal order, each with its last outcome (a call without one
    is left out: it has not ended), then its checks as recorded."""
    first = log[0] if log else None
    ws = first.workspace if isinstance(first, RunCreated) else None
    proposed: dict[str, ToolCallProposed] = {}
    ended: dict[str, str] = {}
    checks: list[Step] = []
    attempt = turn = 0
    for e in log:
        turn = max(turn, getattr(e, "turn", 0) or 0)
        if isinstance(e, ToolCallProposed):
            proposed[e.call_id] = e
        elif isinstance(e, ToolCallSucceeded):
            ended[e.call_id] = "ok " + _plain(e.output, ws)
        elif isinstance(e, ToolCallFailed):
            ended[e.call_id] = f"error {e.error.code}"
        elif isinstance(e, ToolCallRejected):
            ended[e.call_id] = f"rejected {e.error.code}"
        elif isinstance(e, AcceptanceStarted):
            attempt = e.attempt
        elif isinstance(e, AcceptanceChecked):
            verdict = "passed" if e.passed else "failed"
            checks.append(Step(check_id(attempt, e.index), turn, e.check, "", verdict, True))
    calls = [
        Step(c, p.turn, p.name, _plain(p.input, ws), ended[c])
        for c, p in proposed.items()
        if c in ended
    ]
    return calls + checks


def _plain(value: Any, workspace: str | None) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text.replace(workspace, "<workspace>") if workspace else text


def departed(origin: Sequence[object], branch: Sequence[object]) -> Step | None:
    """The branch's first ended call that is not the origin's (another input or outcome,
    or a call the origin never made); None while they agree."""
    theirs = {s.key: s for s in steps(origin)}
    for s in steps(branch):
        if s.is_check:
            continue
        o = theirs.get(s.key)
        if o is None or (o.name, o.input, o.outcome) != (s.name, s.input, s.outcome):
            return s
    return None


@dataclass(frozen=True, slots=True)
class Differs:
    key: str
    turn: int
    name: str
    what: tuple[str, ...]  # of "input", "outcome", "files", "only in the origin", …
    origin: str
    branch: str
    files: tuple[str, ...] = ()  # the paths a write changed differently


def compare(
    origin: Sequence[Step],
    branch: Sequence[Step],
    files: tuple[Mapping[str, Files], Mapping[str, Files]],
    *,
    since_turn: int,
) -> list[Differs]:
    """Every call from `since_turn` on that differs, in the branch's order, then the
    origin's calls the branch never made (checks: `flipped`)."""
    mine = {s.key: s for s in branch if not s.is_check}
    theirs = {o.key: o for o in origin if not o.is_check}
    out: list[Differs] = []
    for s in mine.values():
        if s.turn >= since_turn and (d := _differs(theirs.get(s.key), s, files)) is not None:
            out.append(d)
    for o in theirs.values():
        if o.turn >= since_turn and o.key not in mine:
            out.append(Differs(o.key, o.turn, o.name, ("only in the origin",), _shown(o), ""))
    return out


def _differs(
    o: Step | None, s: Step, files: tuple[Mapping[str, Files], Mapping[str, Files]]
) -> Differs | None:
    if o is None:
        return Differs(s.key, s.turn, s.name, ("only in the branch",), "", _shown(s))
    what = [w for w, a, b in (("tool", o.name, s.name), ("input", o.input, s.input),
                              ("outcome", o.outcome, s.outcome)) if a != b]  # fmt: skip
    before, after = files[0].get(s.key, ()), files[1].get(s.key, ())
    paths = tuple(sorted({f[0] for f in set(before) ^ set(after)}))
    if paths:
        what.append("files")
    if not what:
        return None
    return Differs(s.key, s.turn, s.name, tuple(what), _shown(o), _shown(s), paths)


def _shown(s: Step) -> str:
    return f"{s.name}({s.input}) -> {s.outcome}" if s.input else f"{s.name}: {s.outcome}"


def flipped(origin: Sequence[Step], branch: Sequence[Step]) -> list[tuple[str, str, str, str]]:
    """The checks whose verdict differs: (id, check, origin's, branch's); a check one
    side never ran is `not run` there."""
    a = {s.key: s for s in origin if s.is_check}
    b = {s.key: s for s in branch if s.is_check}
    out = []
    for key in sorted(set(a) | set(b)):
        left = a[key].outcome if key in a else "not run"
        right = b[key].outcome if key in b else "not run"
        if left != right:
            out.append((key, (a.get(key) or b[key]).name, left, right))
    return out
