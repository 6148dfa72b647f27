"""Decisions about running one tool call: claim it, record its outcome, record
how it stopped when the run was cancelled. A claim with no result is never
assumed not to have happened: a write becomes an unknown outcome for a human;
a read may be tried again a bounded number of times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never

from agentledger.events.budgets import wall_clock_exceeded
from agentledger.events.event_model import Snapshots
from agentledger.events.read_retry import retried, tries_left
from agentledger.events.state import Call, RunState
from agentledger.events.status import CallStatus, RunStatus
from agentledger.events.types import (
    Event,
    RunEscalated,
    ToolCallCancelled,
    ToolCallFailed,
    ToolCallForceTerminated,
    ToolCallOutcomeUnknown,
    ToolCallStarted,
    ToolCallSucceeded,
    ToolError,
)


def claim_call(s: RunState, call_id: str, *, worker: str, now: float) -> list[Event]:
    call = s.call(call_id)
    if s.status is not RunStatus.RUNNING_TOOLS or call is None:
        return []
    if all(c.call_id != call_id for c in runnable(s)):
        return []  # not claimable, or the run's or the tool's limit of calls at once is reached
    if (timed_out := wall_clock_exceeded(s, now=now)) is not None:
        return [timed_out]
    deadline = now + call.timeout_s + s.spec.policies.claim_grace_s
    started = ToolCallStarted(
        call_id=call_id,
        attempt=call.attempts + 1,
        worker=worker,
        deadline_at=deadline,
        claimed_at=now,
    )
    return [started]


def runnable(s: RunState) -> list[Call]:
    """Claimable calls, within the run's and each tool's limit on calls at once."""
    if s.current_turn is None:
        return []
    running = [c.name for c in s.in_flight]
    room = s.spec.budgets.max_parallel_calls - len(running)
    chosen: list[Call] = []
    for c in s.current_turn.calls:
        if len(chosen) >= room:
            break
        limit = c.max_concurrency
        busy = running.count(c.name) + sum(x.name == c.name for x in chosen)
        if claimable(c) and (limit is None or busy < limit):
            chosen.append(c)
    return chosen


def claimable(call: Call) -> bool:
    """Holds its locks (or needs none): validated, or a read-only call whose
    outcome is unknown with tries left (`agentledger.events.read_retry`)."""
    if call.status is CallStatus.SCHEDULED:
        return True
    if call.reads or call.writes or call.limits:
        return False  # it must be scheduled by the lock service first
    return call.status is CallStatus.VALIDATED or retried(call)


@dataclass(frozen=True, slots=True)
class Printed:
    """What a tool wrote to its stdout and stderr while it ran (bounded; None: nothing)."""

    stdout: str | None = None
    stderr: str | None = None


NOTHING_PRINTED = Printed()


@dataclass(frozen=True, slots=True)
class Succeeded:
    output: Any
    replay_of: str | None = None  # the same operation's earlier attempt: not run again
    printed: Printed = NOTHING_PRINTED
    snapshots: Snapshots | None = None  # the workspace around a write


@dataclass(frozen=True, slots=True)
class Errored:
    error: ToolError
    printed: Printed = NOTHING_PRINTED
    traceback: str | None = None  # an unexpected exception's last frames (the tool's bug)
    snapshots: Snapshots | None = None  # the workspace around a write


@dataclass(frozen=True, slots=True)
class TimedOut:
    after_s: float


@dataclass(frozen=True, slots=True)
class Stopped:
    """The call ended after it was asked to stop: by itself, or killed."""

    requested_at: float
    killed: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class StillRunning:
    """It was asked to stop and did not within the grace period, and could not be killed."""

    requested_at: float


@dataclass(frozen=True, slots=True)
class Lost:
    """The call was sent and its answer can never come: the server serving it died
    or was restarted mid-call. Whether it happened is unknown."""

    reason: str


Outcome = Succeeded | Errored | TimedOut | Stopped | StillRunning | Lost

_stopped_by_itself = ToolError(
    code="internal",
    message="the tool stopped as if cancelled, but nobody asked it to",
    retryable=False,
)


def record_outcome(
    s: RunState,
    call_id: str,
    *,
    attempt: int,
    outcome: Outcome,
    started_at: float,
    finished_at: float,
) -> list[Event]:
    """Recorded whatever the run's state: a side effect's record is never dropped."""
    call = s.call(call_id)
    if call is None or call.attempts != attempt:
        return []  # another attempt owns the call now
    late = call.status is CallStatus.OUTCOME_UNKNOWN
    if late and isinstance(outcome, Succeeded | Errored):
        pass  # its result came after the claim had expired: the real outcome resolves it
    elif call.status is not CallStatus.STARTED:
        return []  # recorded already
    if isinstance(outcome, Stopped) and s.status is RunStatus.RUNNING_TOOLS:
        outcome = Errored(_stopped_by_itself)  # nobody asked it to: a failure, told as such
    return _recorded(s, call, outcome, (started_at, finished_at), late=late)


def _recorded(
    s: RunState, call: Call, outcome: Outcome, times: tuple[float, float], *, late: bool
) -> list[Event]:
    """The events that record `outcome` of a call whose claim it answers, which ran
    `times` (from its start to its end, or to when it was given up on)."""
    started_at, finished_at = times
    match outcome:
        case Succeeded(output, replay_of, printed, snapshots):
            succeeded = ToolCallSucceeded(
                call_id=call.call_id, output=output, replay_of=replay_of, stdout=printed.stdout,
                stderr=printed.stderr, started_at=started_at, finished_at=finished_at,
                snapshots=snapshots,
                **({"resolved_by": "late_outcome"} if late else {}),
            )  # fmt: skip
            return [succeeded]
        case Errored(error, printed, traceback, snapshots):
            failed = ToolCallFailed(
                call_id=call.call_id, error=error, stdout=printed.stdout, stderr=printed.stderr,
                traceback=traceback, started_at=started_at, finished_at=finished_at,
                snapshots=snapshots,
            )  # fmt: skip
            return [failed]
        case TimedOut(after_s):
            return _timed_out(s, call, after_s, times)
        case Stopped(requested_at, killed, detail):
            return [_stopped(call.call_id, requested_at, killed, detail, at=finished_at)]
        case StillRunning(requested_at):
            reason = f"asked to stop at {requested_at:.3f} and still running after the grace period"
            return unknown_outcome(s, call, reason, at=finished_at)
        case Lost(reason):
            return unknown_outcome(s, call, reason, at=finished_at)
        case _:
            assert_never(outcome)


def _timed_out(s: RunState, call: Call, after_s: float, times: tuple[float, float]) -> list[Event]:
    """A read that timed out failed (and may be asked again); a write may have happened."""
    started_at, finished_at = times
    if call.read_only:
        error = ToolError(code="timeout", message=f"no result within {after_s:g}s", retryable=True)
        failed = ToolCallFailed(
            call_id=call.call_id, error=error, started_at=started_at, finished_at=finished_at
        )
        return [failed]
    reason = f"the write timed out after {after_s:g}s; it may have happened"
    return unknown_outcome(s, call, reason, at=finished_at)


def _stopped(
    call_id: str, requested_at: float, killed: bool, detail: str, *, at: float
) -> ToolCallCancelled | ToolCallForceTerminated:
    """A call that ended after it was asked to stop: killed, or by itself."""
    if killed:
        return ToolCallForceTerminated(
            call_id=call_id, requested_at=requested_at, terminated_at=at, detail=detail
        )
    return ToolCallCancelled(
        call_id=call_id, requested_at=requested_at, stopped_at=at, detail=detail
    )


def unknown_outcome(s: RunState, call: Call, reason: str, *, at: float) -> list[Event]:
    unknown = ToolCallOutcomeUnknown(call_id=call.call_id, reason=reason)
    if s.status is not RunStatus.RUNNING_TOOLS:
        return [unknown]  # the run is stopping or stopped: record, do not steer it
    if not call.read_only and call.resolvable:
        return [unknown]  # the tool's lookup(op_key) will say what happened
    if not call.read_only:
        detail = f"outcome of write {call.name}({call.call_id}) unknown: {reason}"
        return [unknown, RunEscalated(reason="outcome_unknown", detail=detail)]
    if not tries_left(call):
        error = ToolError(
            code="timeout", message=f"{call.attempts} attempts gave no result", retryable=False
        )
        return [unknown, ToolCallFailed(call_id=call.call_id, error=error, finished_at=at)]
    return [unknown]
