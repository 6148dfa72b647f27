"""An outcome in hand is kept across a Redis outage: `through_outage` tries
again on lost connections and timeouts until its bound, and lets every other
error through at once."""

from __future__ import annotations

import pytest
import redis

from agentledger.services.handlers.outage import through_outage


def test_a_call_that_fails_while_redis_is_away_is_tried_again_until_it_answers() -> None:
    tries = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 4:
            raise redis.ConnectionError("Connection refused")
        return "recorded"

    assert through_outage(flaky, outage_s=30, doing="appending") == "recorded"
    assert len(tries) == 4


def test_an_outage_longer_than_the_bound_is_given_up_with_its_error() -> None:
    tries = []

    def down() -> None:
        tries.append(1)
        raise redis.TimeoutError("Timeout reading from socket")

    with pytest.raises(redis.TimeoutError):
        through_outage(down, outage_s=0.3, doing="appending")
    assert 2 <= len(tries) <= 8  # backed off, not spun


def test_an_error_that_is_not_an_outage_is_not_retried() -> None:
    tries = []

    def refused() -> None:
        tries.append(1)
        raise redis.ResponseError("NOSCRIPT")

    with pytest.raises(redis.ResponseError):
        through_outage(refused, outage_s=30, doing="appending")
    assert len(tries) == 1


def test_with_no_bound_nothing_is_retried() -> None:
    tries = []

    def down() -> None:
        tries.append(1)
        raise redis.ConnectionError("Connection refused")

    with pytest.raises(redis.ConnectionError):
        through_outage(down, outage_s=0, doing="appending")
    assert len(tries) == 1
