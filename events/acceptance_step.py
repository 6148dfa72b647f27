"""Decisions of the acceptance worker. The model ending its turn only moves a run
to `accepting`; the run completes when the declared checks pass on evidence the
worker gathered itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.budgets import turns_left
from events.state import RunState
from events.status import RunStatus
from events.types import (
    AcceptanceChecked,
    AcceptanceFailed,
    AcceptanceStarted,
    Event,
    RunCompleted,
    RunFailed,
)


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    passed: bool
    evidence: dict[str, Any]
    checked_at: float


def start_acceptance(s: RunState, *, now: float, lease_s: float) -> list[Event]:
    if s.status is not RunStatus.ACCEPTING:
        return []
    if s.acceptance_claim_deadline is not None and now < s.acceptance_claim_deadline:
        return []
    return [AcceptanceStarted(attempt=s.acceptance_attempts + 1, deadline_at=now + lease_s)]


def record_acceptance(s: RunState, *, attempt: int, results: Sequence[CheckResult]) -> list[Event]:
    if s.status is not RunStatus.ACCEPTING or s.acceptance_attempts != attempt:
        return []
    checked: list[Event] = [
        AcceptanceChecked(
            index=i, check=r.check, passed=r.passed, evidence=r.evidence, checked_at=r.checked_at
        )
        for i, r in enumerate(results)
    ]
    failed = [
        f"check {i + 1} ({r.check}): {_why(r)}" for i, r in enumerate(results) if not r.passed
    ]
    if not failed:
        detail = (
            f"{len(results)} acceptance checks passed"
            if results
            else "no acceptance checks were declared"
        )
        return [*checked, RunCompleted(detail=detail)]
    if turns_left(s) > 0:
        feedback = "The task is not accepted yet. Failed checks:\n" + "\n".join(failed)
        return [*checked, AcceptanceFailed(feedback=feedback)]
    return [*checked, RunFailed(reason="acceptance_failed", detail="; ".join(failed))]


def _why(r: CheckResult) -> str:
    reason = r.evidence.get("reason")
    return str(reason) if reason else "failed"


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
