"""Exit codes of the CLI: one per way a run can end (`run`, `status`), and one
per way a command can fail."""

from __future__ import annotations

from typing import assert_never

from agentledger.events.status import RunStatus

R = RunStatus

CHECK_FAILED = 1  # replay: a broken log or a divergence; context: the view does not verify
USAGE = 2  # a bad spec, bad arguments (a malformed run id, a number out of bounds) or settings, an unknown run, a control of a run that already ended or whose state it does not fit, or one the intake refused: nothing was appended
STILL_LIVE = 9  # `status` of a run that has not ended, or whose request still waits in the inbox for the intake
NO_REDIS = 10  # no Redis to use: nothing answers at the URL, what answers is not a Redis (an HTTP server, a TLS port, an echo), the Redis there refuses the login, this command may not start one, or it went away
NO_WORKERS = 11  # a control with no live intake to take it: nothing was left queued
SERVED = 12  # `run --attach` of a run a live process already serves: nothing was started
BUG = 70  # the CLI itself failed: a bug (the traceback is kept in the state folder)
INTERRUPTED = 130  # SIGINT or SIGTERM

# `run` and `status` exit with the code of the state the run is in (docs/reference/exit-codes.md
# is made from these comments and the ones above, `make docs`)
BY_STATUS: dict[RunStatus, int] = {
    RunStatus.COMPLETED: 0,  # the model ended its turn and every acceptance check passed
    RunStatus.FAILED: 1,  # checks failed with no turns left, a stop the run does not go on from, a model error, an abort
    RunStatus.BUDGET_EXHAUSTED: 3,  # the next step would exceed a budget (turns, tokens, cost, failures)
    RunStatus.TIMEOUT: 4,  # the wall-clock budget ran out
    RunStatus.CANCELLED: 5,  # cancelled on request; nothing is rolled back
    RunStatus.AWAITING_HUMAN: 6,  # not ended: the run waits for a person (reply, resume or abort)
}


def for_status(status: RunStatus) -> int:
    """The code of a run in `status`: its own when it ended or waits for a person,
    STILL_LIVE while it moves on or waits for an approval. A status added to
    RunStatus fails mypy here until it is placed (and `test_exhaustive` until
    BY_STATUS has its code when it is an end)."""
    match status:
        case (
            R.COMPLETED | R.FAILED | R.BUDGET_EXHAUSTED | R.TIMEOUT | R.CANCELLED
            | R.AWAITING_HUMAN
        ):  # fmt: skip
            return BY_STATUS[status]
        case (
            R.FLOWING | R.HELD | R.REQUESTING_MODEL | R.VALIDATING | R.RUNNING_TOOLS | R.ACCEPTING
            | R.CANCELLING | R.AWAITING_APPROVAL
        ):  # fmt: skip
            return STILL_LIVE
        case _:
            assert_never(status)
