"""The chaos scenarios by name. Each starts its own private redis-server and
workers, injects its fault, waits for every run to end or wait for a person,
and returns its figures (checked against the issue's zeros by `Figures.expect`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.chaos.faults import (
    lock_holder_stopped,
    redis_freeze,
    redis_outage,
    redis_restart,
    worker_kills,
)
from tests.chaos.inbox import inbox_garbage
from tests.chaos.runs import Size
from tests.chaos.tally import Figures
from tests.chaos.users import two_users

Scenario = Callable[[Path, Size], Figures]

SCENARIOS: dict[str, Scenario] = {
    "kills": worker_kills,
    "aof": redis_restart,
    "sigstop": lock_holder_stopped,
    "garbage": inbox_garbage,
    "users": two_users,
    "outage": redis_outage,
    "freeze": redis_freeze,
}


__all__ = ["SCENARIOS", "Size"]
