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


@dataclass(frozen=True, slots=True)
class DriveFlow:
    """Move a flow's run on (`agentledger.services.handlers.flow`): start its stage, make
    the child run it started if it is not there yet, record the child's end, cancel
    the child of a cancelled flow. A child's end sends it to its parent."""

    run_id: str
    pool: ClassVar[Pool] = Pool.TOOLS


@dataclass(frozen=True, slots=True)
class StopChild:
    """A cancelled flow's live child is to be cancelled (then its end recorded): the
    same handler as `DriveFlow`, a command of its own so that the cancel queues it
    (a `DriveFlow` may be due already)."""

    run_id: str
    pool: ClassVar[Pool] = Pool.TOOLS


Command = RequestModel | DriveCall | ResolveCall | RunAcceptance | DriveFlow | StopChild
