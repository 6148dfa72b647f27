"""Given a turn's model requests, when one fails, then the failure is recorded
with its cause and the turn is asked again after a wait, or the run ends
`failed` with the cause: at once when retrying cannot help, else once the
turn's attempts or its time are used up (`agentledger.events.model_retry`)."""

from __future__ import annotations

from typing import get_args

import pytest
from runlog import LEASE_S, T0, Log, do_model_turn, do_request, text

from agentledger.events.dispatch import due_commands
from agentledger.events.model_retry import RETRYING, ModelFailure, RetryBound, backoff_s, retryable
from agentledger.events.model_step import record_model_error, request_model
from agentledger.events.spans import spans_of
from agentledger.events.status import RunStatus
from agentledger.events.ticks import next_tick
from agentledger.events.types import ModelErrorKind, ModelRequested, ModelRequestFailed, RunFailed
from agentledger.services.errors import ConfigError
from agentledger.services.handlers.model import retry_bound
from agentledger.services.settings import from_env

R = RunStatus
BOUND = RetryBound(max_attempts=3, retry_s=60.0)
REFUSED = ModelFailure("connection", "connection refused at http://127.0.0.1:1")
OVERLOADED = ModelFailure("overloaded", "overloaded (529 overloaded_error): Overloaded", status=529)
WRONG_KEY = ModelFailure(
    "authentication",
    "authentication failed (401 authentication_error): invalid x-api-key",
    status=401,
)


def fail(log: Log, failure: ModelFailure, *, now: float, bound: RetryBound = BOUND) -> list:
    attempt = log.s.model_attempts
    return log.decide(
        record_model_error, turn=log.s.turns_used + 1, attempt=attempt, failure=failure,
        now=now, bound=bound,
    )  # fmt: skip


def claim(log: Log, *, now: float, bound: RetryBound = BOUND) -> list:
    return log.decide(request_model, now=now, lease_s=LEASE_S, bound=bound)


@pytest.mark.parametrize("kind", get_args(ModelErrorKind))
def test_only_failures_a_later_attempt_may_get_past_are_retried(kind: ModelErrorKind) -> None:
    transient = {
        "connection",
        "timeout",
        "rate_limited",
        "overloaded",
        "server_error",
        "stream_broken",
    }
    assert retryable(kind) is (kind in transient)
    assert RETRYING == transient


def test_a_failure_retrying_cannot_help_ends_the_run_at_once_with_its_cause() -> None:
    log = Log.created()
    do_request(log, now=T0)
    events = fail(log, WRONG_KEY, now=T0 + 0.2)
    assert events == [
        ModelRequestFailed(
            turn=1, attempt=1, kind="authentication", cause=WRONG_KEY.cause, status=401
        ),
        RunFailed(
            reason="model_error",
            detail="model request failed (turn 1): authentication failed (401 authentication_error): "
            "invalid x-api-key; retrying cannot help",
        ),
    ]
    assert log.s.status is R.FAILED
    assert fail(log, WRONG_KEY, now=T0 + 0.3) == [], "recorded once"


def test_a_refused_connection_is_recorded_and_the_turn_is_not_asked_again_before_its_wait() -> None:
    log = Log.created()
    do_request(log, now=T0)
    [failed] = fail(log, REFUSED, now=T0 + 0.1)
    assert isinstance(failed, ModelRequestFailed) and failed.kind == "connection"
    assert failed.cause == "connection refused at http://127.0.0.1:1"
    assert failed.retry_at == T0 + 0.1 + backoff_s(BOUND, log.run_id, 1, 1)
    assert log.s.status is R.REQUESTING_MODEL
    assert fail(log, REFUSED, now=T0 + 0.2) == [], "the attempt's failure is recorded once"
    assert claim(log, now=failed.retry_at - 0.001) == []
    assert due_commands(log.s, now=failed.retry_at - 0.001) == []
    assert next_tick(log.s) == failed.retry_at, "the sweeper looks again when the wait is over"
    wait = failed.retry_at - (T0 + 0.1)
    assert log.s.detail == (
        f"turn 1 attempt 1 failed: connection refused at http://127.0.0.1:1; asked again {wait:.1f} s later"
    ), "status says why the run waits"
    assert claim(log, now=failed.retry_at) == [
        ModelRequested(turn=1, attempt=2, deadline_at=failed.retry_at + LEASE_S)
    ]


def test_the_backoff_doubles_per_attempt_up_to_its_longest_wait_with_a_jitter_fixed_by_the_run() -> (
    None
):
    bound = RetryBound(base_s=1.0, max_wait_s=6.0)
    waits = [backoff_s(bound, "r-1", 1, attempt) for attempt in (1, 2, 3, 4, 5)]
    for wait, full in zip(waits, [1.0, 2.0, 4.0, 6.0, 6.0], strict=True):
        assert full * 0.5 <= wait < full
    assert waits == [backoff_s(bound, "r-1", 1, attempt) for attempt in (1, 2, 3, 4, 5)]
    assert backoff_s(bound, "r-2", 1, 1) != waits[0], "runs failing together do not retry together"


def test_a_rate_limit_is_asked_again_when_the_api_said() -> None:
    log = Log.created()
    do_request(log, now=T0)
    limited = ModelFailure("rate_limited", "rate limited (429 rate_limit_error): slow", 429, 7.0)
    [failed] = fail(log, limited, now=T0 + 1)
    assert failed.retry_at == T0 + 8.0


def test_a_retry_after_past_the_turns_time_ends_the_run_saying_so() -> None:
    log = Log.created()
    do_request(log, now=T0)
    limited = ModelFailure("rate_limited", "rate limited (429 rate_limit_error): slow", 429, 120.0)
    events = fail(log, limited, now=T0 + 1)
    assert [type(e) for e in events] == [ModelRequestFailed, RunFailed]
    assert events[0].retry_at is None
    assert events[1].detail == (
        "model request failed (turn 1): rate limited (429 rate_limit_error): slow; the API asked "
        "to wait 120.0 s, past 60 s after the turn's first attempt (1 attempt; the bound: "
        "3 attempts, 60 s a turn)"
    )


def test_the_turns_last_attempt_failing_ends_the_run_with_the_cause_and_the_attempts() -> None:
    log = Log.created()
    now = T0
    for attempt in (1, 2, 3):
        [claimed] = claim(log, now=now)
        assert isinstance(claimed, ModelRequested) and claimed.attempt == attempt
        events = fail(log, REFUSED, now=now + 0.5)
        now = events[0].retry_at or now
    assert [type(e) for e in events] == [ModelRequestFailed, RunFailed]
    assert log.s.status is R.FAILED
    assert log.s.detail.startswith(
        "model request failed (turn 1): connection refused at http://127.0.0.1:1; "
    )
    assert "gave up after 3 attempts in " in log.s.detail
    assert log.s.detail.endswith("(the bound: 3 attempts, 60 s a turn)")


def test_no_attempt_starts_past_the_turns_time() -> None:
    log = Log.created()
    do_request(log, now=T0)
    [failed] = fail(log, OVERLOADED, now=T0 + 1)
    claim(log, now=failed.retry_at)  # attempt 2, within the bound
    events = fail(log, OVERLOADED, now=T0 + 59.9)  # any wait now ends past 60 s
    assert [type(e) for e in events] == [ModelRequestFailed, RunFailed]
    assert "past 60 s after the turn's first attempt (2 attempts" in events[1].detail


def test_claims_that_ran_out_with_no_reply_use_up_the_turns_attempts() -> None:
    log = Log.created()
    for attempt in (1, 2, 3):
        [claimed] = claim(log, now=T0 + attempt * LEASE_S)
        assert isinstance(claimed, ModelRequested) and claimed.attempt == attempt
    [ended] = claim(log, now=T0 + 4 * LEASE_S)
    assert isinstance(ended, RunFailed) and log.s.status is R.FAILED
    assert ended.detail == (
        "model request failed (turn 1): no reply after 3 attempts (the last claim ran out: its "
        "worker died or hung) (the bound: 3 attempts, 60 s a turn)"
    )


def test_a_failure_of_an_attempt_already_taken_over_is_not_recorded() -> None:
    log = Log.created()
    do_request(log, now=T0)
    claim(log, now=T0 + LEASE_S)  # the first claim ran out: attempt 2
    stale = record_model_error(
        log.s, turn=1, attempt=1, failure=REFUSED, now=T0 + LEASE_S + 1, bound=BOUND
    )
    assert stale == []


def test_a_reply_starts_the_next_turns_attempts_and_time_afresh() -> None:
    log = Log.created()
    do_request(log, now=T0)
    [failed] = fail(log, OVERLOADED, now=T0 + 1)
    log.now = failed.retry_at or T0
    do_model_turn(log, text("done"), stop="end_turn")
    assert (log.s.model_attempts, log.s.model_failed_attempt, log.s.model_first_attempt_at) == (
        0,
        0,
        None,
    )
    assert log.s.detail == "", "the failure is no longer why the run waits"


def test_a_failed_request_ends_its_chat_span_with_the_cause() -> None:
    log = Log.created()
    do_request(log, now=T0)
    fail(log, WRONG_KEY, now=T0 + 0.2)
    [chat] = [
        s for s in spans_of(log.envelopes) if s.attributes.get("gen_ai.operation.name") == "chat"
    ]
    assert chat.error == WRONG_KEY.cause and chat.attributes["error.type"] == "authentication"


def test_the_bound_is_the_operators_settings() -> None:
    assert retry_bound(from_env({})) == RetryBound(max_attempts=5, retry_s=300.0)
    chosen = from_env({"AGENTLEDGER_MODEL_MAX_ATTEMPTS": "7", "AGENTLEDGER_MODEL_RETRY_S": "90"})
    assert retry_bound(chosen) == RetryBound(max_attempts=7, retry_s=90.0)
    for variable in ("AGENTLEDGER_MODEL_MAX_ATTEMPTS", "AGENTLEDGER_MODEL_RETRY_S"):
        with pytest.raises(ConfigError, match=f"^{variable}: must be more than 0, got 0"):
            from_env({variable: "0"})
