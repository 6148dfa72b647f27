"""Commands: what a worker pool is asked to do next. Imperative, ids only, never
stored as truth; the reactor derives them from the folded state."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Queue(StrEnum):
    MODEL = "model"
    VALIDATE = "validate"
    LOCKS = "locks"
    TOOLS = "tools"
    ACCEPT = "accept"


@dataclass(frozen=True, slots=True)
class RequestModel:
    run_id: str
    queue = Queue.MODEL


@dataclass(frozen=True, slots=True)
class ValidateCall:
    run_id: str
    call_id: str
    queue = Queue.VALIDATE


@dataclass(frozen=True, slots=True)
class ScheduleCalls:
    """Ask for the locks of every call of the turn that needs them, in proposal order."""

    run_id: str
    queue = Queue.LOCKS


@dataclass(frozen=True, slots=True)
class ExecuteCall:
    run_id: str
    call_id: str
    queue = Queue.TOOLS


@dataclass(frozen=True, slots=True)
class ResolveCall:
    """Ask the tool's lookup what became of a write whose outcome is unknown."""

    run_id: str
    call_id: str
    queue = Queue.TOOLS


@dataclass(frozen=True, slots=True)
class RunAcceptance:
    run_id: str
    queue = Queue.ACCEPT


Command = RequestModel | ValidateCall | ScheduleCalls | ExecuteCall | ResolveCall | RunAcceptance
