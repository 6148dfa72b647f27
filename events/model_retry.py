"""The bound on a turn's model requests: which failures a later attempt may get
past, how long to wait before it, and when to stop trying.

Every model request is an attempt (`ModelRequested`, counted per turn) and every
failed one is recorded with its cause (`ModelRequestFailed`). A failure of a kind
that retrying can help (nothing answered, a timeout, 429, 529, a 5xx, a broken
stream) is asked again after a wait — the API's `retry-after` when it gave one,
else an exponential backoff with a jitter drawn from the run, turn and attempt
(the same on every replay) — unless the turn has used its attempts or the next
one would start past its time bound; then, and at once for every other kind (a
wrong key, a refused permission, a request the API rejects), the run fails with
the cause. A claim that ran out with no reply (its worker died) used an attempt
too: the turn is not claimed past its attempts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agentledger.events.state import RunState
from agentledger.events.types import Event, ModelErrorKind, ModelRequestFailed, RunFailed

RETRYING: frozenset[ModelErrorKind] = frozenset(
    {"connection", "timeout", "rate_limited", "overloaded", "server_error", "stream_broken"}
)


@dataclass(frozen=True, slots=True)
class RetryBound:
    """The operator's bound on one turn's model requests (`Settings.model_max_attempts`,
    `model_retry_s`) and the backoff between them."""

    max_attempts: int = 5
    retry_s: float = 300.0  # no attempt starts later than this after the turn's first
    base_s: float = 1.0  # the first backoff; it doubles per attempt
    max_wait_s: float = 30.0  # the longest backoff (a `retry-after` may ask for more)


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """One failed model request, as the adapter classified it."""

    kind: ModelErrorKind
    cause: str  # one line: `connection refused at http://127.0.0.1:1`
    status: int | None = None  # the HTTP status, when one came
    retry_after_s: float | None = None  # what the API asked us to wait

    @property
    def retryable(self) -> bool:
        return retryable(self.kind)


def retryable(kind: ModelErrorKind) -> bool:
    """Whether a later attempt may get past a failure of this kind."""
    return kind in RETRYING


def backoff_s(bound: RetryBound, run_id: str, turn: int, attempt: int) -> float:
    """The wait after attempt `attempt` failed: base × 2^(attempt-1), at most
    max_wait_s, times a jitter in [0.5, 1) that runs failing together do not share."""
    full = min(bound.max_wait_s, bound.base_s * 2.0 ** (attempt - 1))
    digest = hashlib.sha256(f"{run_id}:{turn}:{attempt}".encode()).digest()
    return full * (0.5 + int.from_bytes(digest[:4], "big") / 2**33)


def after_failure(
    s: RunState, failure: ModelFailure, *, turn: int, attempt: int, now: float, bound: RetryBound
) -> list[Event]:
    """The failure recorded, then: asked again from `retry_at`, or the run failed."""
    first = s.model_first_attempt_at if s.model_first_attempt_at is not None else now
    spent = max(0.0, now - first)
    if not failure.retryable:
        return _gave_up(failure, turn, attempt, "retrying cannot help")
    if attempt >= bound.max_attempts:
        tried = f"gave up after {_attempts(attempt)} in {spent:.1f} s"
        return _gave_up(failure, turn, attempt, f"{tried} ({_bound(bound)})")
    wait = failure.retry_after_s
    if wait is None:
        wait = backoff_s(bound, s.run_id, turn, attempt)
    if spent + wait > bound.retry_s:
        asked = (
            "the API asked to wait"
            if failure.retry_after_s is not None
            else "the next wait would be"
        )
        past = f"{asked} {wait:.1f} s, past {bound.retry_s:g} s after the turn's first attempt"
        return _gave_up(failure, turn, attempt, f"{past} ({_attempts(attempt)}; {_bound(bound)})")
    return [_failed(failure, turn, attempt, retry_at=now + wait)]


def _failed(
    failure: ModelFailure, turn: int, attempt: int, *, retry_at: float | None = None
) -> ModelRequestFailed:
    return ModelRequestFailed(
        turn=turn, attempt=attempt, kind=failure.kind, cause=failure.cause,
        status=failure.status, retry_at=retry_at,
    )  # fmt: skip


def _gave_up(failure: ModelFailure, turn: int, attempt: int, why: str) -> list[Event]:
    return [_failed(failure, turn, attempt), _ended(turn, f"{failure.cause}; {why}")]


def out_of_attempts(s: RunState, bound: RetryBound) -> RunFailed | None:
    """The turn's claims used its attempts and none brought a reply (their workers
    died, or never recorded one): it is not claimed again."""
    if s.model_attempts < bound.max_attempts:
        return None
    tried = _attempts(s.model_attempts)
    cause = f"no reply after {tried} (the last claim ran out: its worker died or hung)"
    return _ended(s.turns_used + 1, f"{cause} ({_bound(bound)})")


def _bound(bound: RetryBound) -> str:
    return f"the bound: {_attempts(bound.max_attempts)}, {bound.retry_s:g} s a turn"


def _attempts(n: int) -> str:
    return f"{n} attempt{'' if n == 1 else 's'}"


def _ended(turn: int, detail: str) -> RunFailed:
    return RunFailed(reason="model_error", detail=f"model request failed (turn {turn}): {detail}")
