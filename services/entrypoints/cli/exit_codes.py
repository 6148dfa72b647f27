"""Exit codes of `agentledger run` and `status`, one per way a run can end."""

from __future__ import annotations

from events.status import RunStatus

CHECK_FAILED = 1  # replay: a broken log or a divergence; context: the view does not verify
USAGE = 2  # a bad spec, bad arguments: nothing was appended
INTERNAL = 10  # the CLI itself failed (Redis unreachable, a broken log)
STILL_LIVE = 9  # `status` of a run that has not ended

BY_STATUS: dict[RunStatus, int] = {
    RunStatus.COMPLETED: 0,
    RunStatus.FAILED: 1,
    RunStatus.BUDGET_EXHAUSTED: 3,
    RunStatus.TIMEOUT: 4,
    RunStatus.CANCELLED: 5,
    RunStatus.AWAITING_HUMAN: 6,
}


def for_status(status: RunStatus) -> int:
    return BY_STATUS.get(status, STILL_LIVE)
