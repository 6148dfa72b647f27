"""Decisions of the acceptance worker. The model ending its turn only moves a run
to `accepting`; the run completes when the declared checks pass on evidence the
worker gathered itself.

Checks count against the run's wall clock: a check's timeout is its own, held
to the operator's maximum and to what is left of `max_wall_clock_s`, and a run
whose wall clock ends during acceptance ends `timeout`. A check still running
when its run stops (cancelled, timed out) is stopped and recorded as such."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, assert_never

from agentledger.events.budgets import turns_left, wall_clock_exceeded
from agentledger.events.causes import ACCEPTANCE_FAILED, acceptance_failure, check_cause
from agentledger.events.claims import Window, expired
from agentledger.events.event_model import Snapshots
from agentledger.events.state import RunState
from agentledger.events.status import RunStatus
from agentledger.events.types import (
    AcceptanceChecked,
    AcceptanceCheckStopped,
    AcceptanceFailed,
    AcceptanceStarted,
    Event,
    RunCompleted,
    RunFailed,
    Signal,
)
from agentledger.schemas.spec import (
    AcceptanceCheck,
    CommandCheck,
    FileCheck,
    PythonCheck,
    RunSpec,
    ToolCheck,
)


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    passed: bool
    evidence: dict[str, Any]
    checked_at: float
    started_at: float = 0.0
    depends_on: tuple[str, ...] = ("*",)  # resources; "*" is any write of the run
    snapshots: Snapshots | None = None  # the workspace it judged, and left


# how long each kind of check may take, when it does not say itself
TOOL_CHECK_S = 60.0
PYTHON_CHECK_S = 60.0
FILE_CHECK_S = 1.0


def claim_s(spec: RunSpec, *, grace_s: float, most_s: float | None = None) -> float:
    """How long an acceptance claim lasts: the time its checks may legitimately
    take (a command's held to the operator's maximum `most_s`), plus the grace. A
    run with no checks is re-driven after the grace alone if its worker dies; one
    running `pytest` is not taken from a live worker."""

    def limit(check: AcceptanceCheck) -> float:
        match check:
            case CommandCheck():
                return min(check.timeout_s, most_s) if most_s is not None else check.timeout_s
            case ToolCheck():
                return TOOL_CHECK_S
            case FileCheck():
                return FILE_CHECK_S
            case PythonCheck():
                return PYTHON_CHECK_S
            case _:
                assert_never(check)

    return grace_s + sum(limit(c) for c in spec.acceptance)


def may_take_long(spec: RunSpec) -> bool:
    """Whether the run's checks run code (a command, a tool, a function), which can
    take as long as their timeouts; file checks take no time to speak of."""
    return any(isinstance(c, CommandCheck | ToolCheck | PythonCheck) for c in spec.acceptance)


def wall_clock_left(s: RunState, *, now: float) -> float | None:
    """Seconds left of the run's wall clock (negative once it is over), or None."""
    limit = s.spec.budgets.max_wall_clock_s
    return None if limit is None else s.created_at + limit - now


def check_timeout_s(s: RunState, own_s: float, *, now: float, most_s: float) -> float:
    """A check's timeout: its own, held to the operator's maximum and to what is left
    of the run's wall clock (0 once it is over: the check is not run)."""
    left = wall_clock_left(s, now=now)
    return max(0.0, min(own_s, most_s, left if left is not None else own_s))


def acceptance_due(s: RunState, *, now: float, unreachable: Sequence[Window] = ()) -> bool:
    """Whether the run's acceptance may be claimed now: no live claim holds it (`agentledger.events.claims`)."""
    if s.status is not RunStatus.ACCEPTING:
        return False
    return expired(s.acceptance_claim_deadline, now=now, unreachable=unreachable)


def start_acceptance(s: RunState, *, now: float, lease_s: float) -> list[Event]:
    if not acceptance_due(s, now=now):
        return []
    return [AcceptanceStarted(attempt=s.acceptance_attempts + 1, deadline_at=now + lease_s)]


def record_acceptance(
    s: RunState, *, attempt: int, results: Sequence[CheckResult], now: float | None = None
) -> list[Event]:
    """The checks' results and what they lead to; past the run's wall clock at `now`,
    the run times out whatever they say (the checks done are recorded first). On a
    run that ended (cancelled, out of wall clock) as its last check ran to its own
    end, that check is recorded as stopped with the run (`ended_with_the_run`)."""
    if s.status is not RunStatus.ACCEPTING or s.acceptance_attempts != attempt:
        return ended_with_the_run(s, attempt=attempt, results=results)
    results = [_fresh(s, r) for r in results]
    checked: list[Event] = [
        AcceptanceChecked(
            index=i,
            check=r.check,
            passed=r.passed,
            evidence=r.evidence,
            started_at=r.started_at,
            checked_at=r.checked_at,
            depends_on=r.depends_on,
            snapshots=r.snapshots,
        )
        for i, r in enumerate(results)
    ]
    if now is not None and (timed_out := wall_clock_exceeded(s, now=now)) is not None:
        return [*checked, timed_out]
    failed = [
        f"check {i + 1} ({r.check}): {check_cause(r.evidence)}"
        for i, r in enumerate(results)
        if not r.passed
    ]
    if not failed:
        detail = (
            f"{len(results)} acceptance check{'s' if len(results) != 1 else ''} passed"
            if results
            else "no acceptance checks were declared"
        )
        return [*checked, RunCompleted(detail=detail)]
    if turns_left(s) > 0:
        feedback = "The task is not accepted yet. Failed checks:\n" + "\n".join(failed)
        return [*checked, AcceptanceFailed(feedback=feedback)]
    told = acceptance_failure([(r.check, r.passed, r.evidence) for r in results])
    return [*checked, RunFailed(reason=ACCEPTANCE_FAILED, detail=told or "; ".join(failed))]


def ended_with_the_run(s: RunState, *, attempt: int, results: Sequence[CheckResult]) -> list[Event]:
    """The run ended while acceptance `attempt`'s last check ran, and that check
    ended on its own (its timeout is what was left of the wall clock, so the two end
    together): it is the check the run's end stopped, recorded once; its evidence's
    reason says how it ended. Nothing when no check ran."""
    if not results:
        return []
    last = results[-1]
    reason = str(last.evidence.get("reason") or ("passed" if last.passed else "failed"))
    return record_check_stopped(
        s,
        attempt=attempt,
        index=len(results) - 1,
        check=last.check,
        requested_at=s.updated_at,
        stopped_at=last.checked_at,
        signals=(),
        detail=f"it ended as the run did, on its own: {reason}",
    )


def record_check_stopped(
    s: RunState,
    *,
    attempt: int,
    index: int,
    check: str,
    requested_at: float,
    stopped_at: float,
    signals: Sequence[Signal],
    detail: str,
) -> list[Event]:
    """A check of acceptance `attempt` that was stopped because the run was
    cancelled or ran out of wall clock (the only ways a run ends while its checks
    run); recorded once, and only on a run that did end so."""
    stopped = s.status in (RunStatus.CANCELLED, RunStatus.TIMEOUT)
    if not stopped or s.acceptance_attempts != attempt:
        return []
    if s.acceptance_claim_deadline is None:  # recorded already
        return []
    return [
        AcceptanceCheckStopped(
            attempt=attempt,
            index=index,
            check=check,
            requested_at=requested_at,
            stopped_at=stopped_at,
            signals=tuple(signals),
            detail=detail,
        )  # fmt: skip
    ]


def _fresh(s: RunState, r: CheckResult) -> CheckResult:
    """A pass on evidence older than the last write to what it depends on does not count."""
    if not r.passed:
        return r
    for turn in s.turns:
        for c in turn.calls:
            late = c.finished_at is not None and c.finished_at > r.started_at
            if late and not c.read_only and _touches(c.writes, r.depends_on):
                reason = f"stale evidence: {c.name}({c.call_id}) wrote at {c.finished_at:.3f}, after the check began"
                return replace(r, passed=False, evidence={**r.evidence, "reason": reason})
    return r


def _touches(writes: Sequence[str], depends_on: Sequence[str]) -> bool:
    return "*" in depends_on or bool(set(writes) & set(depends_on))


def contains(expected: Any, actual: Any) -> bool:
    """Subset match: every key of an expected mapping is in the actual one with a
    matching value; lists match element-wise; anything else must be equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(contains(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)
