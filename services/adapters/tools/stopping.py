"""Running a command while watching for a request to stop it (its run was
cancelled or ended): the command runs on a thread of its own (`threads`) while
the caller looks at `stop_requested`; once asked, its processes get SIGTERM,
and whatever still runs after the grace gets SIGKILL (the sandbox whole). A
command that starts after the request is killed as it starts. What was sent,
and when, is reported (`StopReport`), for the record of the step it ended."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from agentledger.services.adapters.tools import threads
from agentledger.services.adapters.tools.process import Completed, Process

POLL_S = 0.05
KILL_WAIT_S = 1.0  # after SIGKILL: the sandbox's init takes its namespace with it at once
SignalName = Literal["SIGTERM", "SIGKILL"]


@dataclass(frozen=True)
class StopReport:
    """The command was stopped on request: at `requested_at` (the run's time),
    done at `stopped_at`, having been sent `signals` in that order."""

    requested_at: float
    stopped_at: float
    signals: tuple[SignalName, ...]
    detail: str


@dataclass
class _Started:
    """The processes a command started, and whether new ones are killed at once."""

    processes: list[Process] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def add(self, process: Process) -> None:
        with self.lock:
            self.processes.append(process)
            late = self.closed
        if late:  # started after the stop was asked for: it does not get to run
            process.signal(signal.SIGKILL)

    def send(self, sig: signal.Signals) -> int:
        with self.lock:
            self.closed = True
            running = list(self.processes)
        return sum(1 for p in running if p.signal(sig))


def run_stoppable(
    start: Callable[[Callable[[Process], None]], Completed],
    *,
    stop_requested: Callable[[], float | None],
    grace_s: float,
    clock: Callable[[], float] = time.time,
) -> Completed | StopReport:
    """`start(started)` runs the command to its end, telling `started` of each process
    as it runs (`run_command`'s `started`); its exceptions are raised here."""
    started = _Started()
    box: dict[str, Completed | BaseException] = {}

    def work() -> None:
        try:
            box["done"] = start(started.add)
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller, raised there
            box["done"] = exc

    job = threads.start(work)
    while job.is_alive():
        job.join(POLL_S)
        if job.is_alive() and (requested_at := stop_requested()) is not None:
            return _stop(job, started, requested_at, grace_s, clock)
    done = box["done"]
    if isinstance(done, BaseException):
        raise done
    return done


def _stop(
    job: threads.Job,
    started: _Started,
    requested_at: float,
    grace_s: float,
    clock: Callable[[], float],
) -> StopReport:
    signals: list[SignalName] = []
    if started.send(signal.SIGTERM):
        signals.append("SIGTERM")
    job.join(grace_s)
    killed = 0
    if job.is_alive():
        killed = started.send(signal.SIGKILL)
        signals += ["SIGKILL"] if killed else []
        job.join(KILL_WAIT_S)
    if not signals:
        detail = "it had no process running"
    elif killed:
        detail = f"SIGTERM, then SIGKILL to {killed} command(s) still running after {grace_s:g}s"
    else:
        detail = f"SIGTERM; it ended within the grace of {grace_s:g}s"
    return StopReport(requested_at, clock(), tuple(signals), detail)
