"""Errors of the pure core: a shallow tree; each says whether retrying helps."""

from __future__ import annotations


class CoreError(Exception):
    retryable = False


class IllegalTransition(CoreError):
    """An event that the state machine does not allow in the current state.

    Raised by decisions (refusing to append) and by `apply` (a corrupted log
    fails loudly instead of folding into a wrong state)."""

    def __init__(self, status: object, event_type: str, run_id: str, detail: str = ""):
        self.status = status
        self.event_type = event_type
        self.run_id = run_id
        self.detail = detail
        extra = f": {detail}" if detail else ""
        super().__init__(
            f"illegal transition in run {run_id!r}: {event_type!r} in state {str(status)!r}{extra}"
        )


class BrokenLog(CoreError):
    """A log that cannot be folded: a gap in `seq`, or events of another run."""

    def __init__(self, run_id: str, seq: int, detail: str):
        self.run_id = run_id
        self.seq = seq
        self.detail = detail
        super().__init__(f"broken log of run {run_id!r} at seq {seq}: {detail}")


class ControlRefused(CoreError):
    """A control (cancel, approve, reply…) that does not fit the run's state."""

    def __init__(self, run_id: str, reason: str):
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id!r}: {reason}")
