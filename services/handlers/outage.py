"""Riding out a Redis outage with something in hand. A worker that holds what
only it knows — an outcome of a side effect, the claim of an operation key it
is about to use — keeps trying for a bounded time (`outcome_retry_s`) with
back-off, instead of letting the failure turn a known outcome into an unknown
one. Only lost connections and timeouts are retried: every other error is the
caller's to see. What is retried must be safe to resend (the store recognises
an append that landed; a step re-decides on the log; the ledger's calls are
keyed by their owner)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis

FIRST_PAUSE_S = 0.05
LONGEST_PAUSE_S = 1.0
T = TypeVar("T")
log = logging.getLogger(__name__)

OUTAGE_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


def through_outage(what: Callable[[], T], *, outage_s: float, doing: str) -> T:
    """`what()`, tried again across an outage of up to `outage_s` seconds."""
    give_up = time.monotonic() + outage_s
    pause = FIRST_PAUSE_S
    warned = False
    while True:
        try:
            return what()
        except OUTAGE_ERRORS as exc:
            left = give_up - time.monotonic()
            if left <= 0:
                raise
            if not warned:  # once per outage, not once per try
                log.warning("Redis unreachable while %s (%s); retrying for %.0fs", doing, exc, left)
                warned = True
            time.sleep(min(pause, left))
            pause = min(pause * 2, LONGEST_PAUSE_S)
