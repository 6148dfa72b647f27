"""Commands: what a worker pool is asked to do next. Imperative, ids only, never
stored as truth; derived from the folded state (`agentledger.events.dispatch`) by whoever
appended the step that made them due, and re-derived by the sweeper for a run
whose command was lost. Each goes to its pool's stream of the run's task queue."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar


class Pool(StrEnum):
    MODEL = "model"
    TOOLS = "tools"
    ACCEPT = "accept"


@dataclass(frozen=True, slots=True)
class RequestModel:
    run_id: str
    pool: ClassVar[Pool] = Pool.MODEL


@dataclass(frozen=True, slots=True)
class DriveCall:
    """Move the call on as far as it can go now, in one step of one worker: validate
    the turn's calls, ask for their locks (in proposal order), claim it, run it."""

    run_id: str
    call_id: str
    pool: ClassVar[Pool] = Pool.TOOLS


@dataclass(frozen=True, slots=True)
class ResolveCall:
    """Ask the tool's lookup what became of a write whose outcome is unknown."""

    run_id: str
    call_id: str
    pool: ClassVar[Pool] = Pool.TOOLS


@dataclass(frozen=True, slots=True)
class RunAcceptance:
    run_id: str
    pool: ClassVar[Pool] = Pool.ACCEPT


Command = RequestModel | DriveCall | ResolveCall | RunAcceptance
